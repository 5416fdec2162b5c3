"""Served, signed work is paid even when the coordinator withholds the commit: a node remembers each
commitment it signed; once the coordinator asks to release that task, or has not committed it within a grace
period, the node vouches for the commitment on-chain (which stops the release for good), and once every
assigned miner has vouched for exactly that commitment, it commits it itself."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from client_sdk.chain.contracts import TaskRegistry
from client_sdk.eip712 import ResultCommitment, digest
from client_sdk.errors import ContractRevert
from client_sdk.protocol.task import TaskStatus

log = logging.getLogger("batchmarket.miner")

# How long a node waits for its coordinator to commit what the node signed before it vouches on-chain (a
# transaction, so not for every task: a coordinator commits within seconds of the last signature).
COMMIT_GRACE_S = 600.0


@dataclass
class _Signed:
    commitment: ResultCommitment
    signed_at: float
    vouched: bool = False


class Voucher:
    """Follows the tasks this node signed results of until each is committed, released or expired. `tasks` is
    the task registry as this miner (it sends the vouch and the commit) on the chain `chain_id`."""

    def __init__(
        self,
        tasks: TaskRegistry,
        chain_id: int,
        grace_s: float = COMMIT_GRACE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.tasks = tasks
        self.chain_id = chain_id
        self.grace_s = grace_s
        self.clock = clock
        self._signed: dict[int, _Signed] = {}

    def signed(self, commitment: ResultCommitment) -> None:
        """This node signed `commitment` and is about to hand the signature over (a later one for the same
        task replaces it). If the coordinator has asked to release the task, the node vouches first, so the
        release cannot go through between the handover and the node's next look (a chain error propagates:
        then the signature waits for the next try)."""
        signed = _Signed(commitment, self.clock())
        if self.tasks.release_at_of(commitment.task_id) != 0:
            self.tasks.vouch_results(commitment)
            signed.vouched = True
            log.warning(
                "task %d: the coordinator asked to release it; vouched on-chain first", commitment.task_id
            )
        self._signed[commitment.task_id] = signed

    @property
    def following(self) -> list[int]:
        """The tasks whose commit this node still waits for."""
        return sorted(self._signed)

    def check(self) -> None:
        """One look at every followed task: forgets those no longer Assigned, vouches where the coordinator
        asked to release or is late, and commits what every miner vouched for."""
        for task_id, signed in list(self._signed.items()):
            if self.tasks.get_task(task_id).status != TaskStatus.ASSIGNED:
                del self._signed[task_id]
                continue
            late = self.clock() - signed.signed_at >= self.grace_s
            if not signed.vouched and (late or self.tasks.release_at_of(task_id) != 0):
                self.tasks.vouch_results(signed.commitment)
                signed.vouched = True
                log.warning(
                    "task %d: the coordinator %s; vouched on-chain for the results this node signed",
                    task_id,
                    "has not committed what we signed" if late else "asked to release it",
                )
            if signed.vouched and self._everyone_vouched(signed.commitment):
                self._commit(signed.commitment)

    def _everyone_vouched(self, commitment: ResultCommitment) -> bool:
        vouches = self.tasks.vouches_of(commitment.task_id)
        registry = self.tasks.contract.address
        miners = self.tasks.miners_of(commitment.task_id)
        return len(vouches) == len(miners) and all(
            vouch == digest(commitment, miner, self.chain_id, registry)
            for vouch, miner in zip(vouches, miners, strict=True)
        )

    def _commit(self, commitment: ResultCommitment) -> None:
        task_id = commitment.task_id
        try:
            self.tasks.commit_results(commitment, [b""] * len(commitment.served_roots))
        except ContractRevert as exc:  # another miner (or the coordinator) committed first
            log.info("task %d: not committed by this node: %s", task_id, exc)
        else:
            log.warning("task %d: committed its results in place of the coordinator", task_id)
        del self._signed[task_id]
