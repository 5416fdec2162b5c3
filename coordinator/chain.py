"""The coordinator's view of the chain: the few reads and writes the batch lifecycle needs, over the SDK's
contract bindings, signed with the coordinator's key."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from eth_account.signers.local import LocalAccount
from redis import Redis

from client_sdk.chain.contracts import GPURegistry, Market, connect
from client_sdk.chain.transactions import SendingLock
from client_sdk.eip712 import Acceptance, ResultCommitment, acceptance_signer, digest, recover_signer
from client_sdk.protocol.task import Task, TaskTerms
from client_sdk.results import ResultTrees
from coordinator.leases import leased_lock

SEND_LOCK_WAIT_S = 120  # a sender waits this long for another to broadcast (each holds it for seconds)


def redis_sending_lock(redis: Redis) -> SendingLock:
    """A lock per (chain, sender) in Redis, shared by every process using that Redis, held from nonce to
    broadcast on a renewed lease (a crashed holder frees it within the lease)."""

    @contextlib.contextmanager
    def lock(key: tuple[int, str]) -> Iterator[None]:
        chain_id, sender = key
        with leased_lock(redis, f"lock:send:{chain_id}:{sender.lower()}", wait_s=SEND_LOCK_WAIT_S) as held:
            if not held:
                raise TimeoutError(
                    f"another process held the sending lock of {sender} for {SEND_LOCK_WAIT_S} s"
                )
            yield

    return lock


@dataclass(frozen=True)
class Slots:
    """Assigned miners of a commitment's task (lowercase addresses) as the chain has them: `revoked`, those
    that revoked the signer they accepted it with and did not vouch for exactly this commitment (no
    signature can carry their slot: they are left out, or their lines served again without them); `vouched`,
    those that vouched on-chain for exactly it (an empty signature carries their slot); `vouched_other`,
    those that vouched for other results (the contract refuses to leave them out, VouchedOtherResults)."""

    revoked: set[str]
    vouched: set[str]
    vouched_other: set[str]


@dataclass(frozen=True)
class Parties:
    """A task's assigned miners as the chain has them, read once: each one's signer recorded with its
    acceptance, and the mask of those that revoked it (bit i for miners[i])."""

    miners: tuple[str, ...]
    signers: tuple[str, ...]
    revoked_mask: int

    def index_of(self, miner: str) -> int | None:
        """`miner`'s slot in the task, None for a miner the task does not have."""
        lowered = [m.lower() for m in self.miners]
        return lowered.index(miner.lower()) if miner.lower() in lowered else None

    def revoked(self, index: int) -> bool:
        return bool(self.revoked_mask >> index & 1)


class CoordinatorChain:
    def __init__(self, market: Market) -> None:
        self.market = market

    @classmethod
    def connect(
        cls, rpc_url: str, deployment: Path, account: LocalAccount | None, redis: Redis | None = None
    ) -> CoordinatorChain:
        """The chain as `account`; with `redis`, every process connected so (the workers) sends its
        transactions one at a time from nonce to broadcast, so that they never collide on a nonce."""
        return cls(connect(rpc_url, deployment, account, redis_sending_lock(redis) if redis else None))

    @property
    def registry(self) -> GPURegistry:
        return self.market.registry

    def now(self) -> int:
        """Chain time: what deadlines and windows are measured against."""
        return self.market.chain_time()

    def task(self, task_id: int) -> Task:
        return self.market.tasks.get_task(task_id)

    def terms(self, task_id: int) -> TaskTerms:
        """The window, fee, stake-lock floor and value cap the task lives under (fixed at its creation)."""
        return self.market.tasks.terms_of(task_id)

    def challenge_ends_at(self, task_id: int) -> int:
        """End of the task's challenge window, extended by any audit that ran."""
        return self.market.tasks.challenge_ends_at(task_id)

    def assign(
        self, task_id: int, miners: Sequence[str], stake_lock: int, acceptances: Sequence[Acceptance]
    ) -> None:
        self.market.tasks.assign_task(task_id, miners, stake_lock, acceptances)

    def commit(self, commitment: ResultCommitment, signatures: Sequence[bytes]) -> str:
        receipt = self.market.tasks.commit_results(commitment, signatures)
        return "0x" + bytes(receipt["transactionHash"]).hex()

    def finalize(self, task_id: int) -> None:
        self.market.tasks.finalize_task(task_id)

    def expire(self, task_id: int) -> None:
        self.market.tasks.expire_task(task_id)

    def open_challenges(self, task_id: int) -> list[int]:
        """The lines of task `task_id` its owner challenged that wait for an answer."""
        return self.market.challenges.open_challenges(task_id)

    def answer_lines(self, trees: ResultTrees, lines: Sequence[int]) -> dict[int, str | None]:
        """Answers the challenges of `lines` from the task's results `trees`: None where answered, else why
        not."""
        return self.market.challenges.answer_from(trees, lines)

    def release(self, task_id: int) -> None:
        """Refunds an Open task nothing was served for, now (a cancel through the API); an Assigned one only
        once `release_due` says so."""
        self.market.tasks.release_task(task_id)

    def release_due(self, task_id: int, chain_now: int) -> bool:
        """Whether an Assigned task's release may go through now: asks for it first if it was not, or if the
        last request went stale (miners then have the contract's notice to vouch for results they signed,
        which stops the release for good); False while the notice runs or once a miner vouched."""
        tasks = self.market.tasks
        release_at, notice = tasks.release_at_of(task_id), tasks.release_notice()
        if release_at == 0 or chain_now >= release_at + notice:
            tasks.request_release(task_id)
            return False
        return chain_now >= release_at and not tasks.vouches_of(task_id)

    def parties(self, task_id: int) -> Parties:
        """Task `task_id`'s assigned miners, their recorded signers and who revoked theirs."""
        tasks = self.market.tasks
        return Parties(
            tuple(tasks.miners_of(task_id)), tuple(tasks.signers_of(task_id)), tasks.revoked_mask_of(task_id)
        )

    def slots(self, commitment: ResultCommitment, parties: Parties) -> Slots:
        """What the chain says of each assigned miner's slot in `commitment` beside its signature: who
        revoked its signer, who vouched on-chain for exactly it, who vouched for other results."""
        miners = parties.miners
        vouches = self.market.tasks.vouches_of(commitment.task_id) or [bytes(32)] * len(miners)
        chain_id, registry = self.market.w3.eth.chain_id, self.market.deployment.task_registry
        vouched, other = set(), set()
        for miner, vouch in zip(miners, vouches, strict=True):
            if vouch == digest(commitment, miner, chain_id, registry):
                vouched.add(miner.lower())
            elif any(vouch):
                other.add(miner.lower())
        revoked = {m.lower() for i, m in enumerate(miners) if parties.revoked(i)} - vouched
        return Slots(revoked, vouched, other)

    def signer_of(self, miner: str) -> str:
        return self.market.registry.profile_of(miner).signer

    def check_acceptance(self, miner: str, acceptance: Acceptance, task_id: int, stake_lock: int) -> bool:
        """Whether `acceptance` is `miner`'s registered signer's consent to this task and lock."""
        chain_id, registry = self.market.w3.eth.chain_id, self.market.deployment.task_registry
        try:
            signer = acceptance_signer(acceptance, task_id, miner, stake_lock, chain_id, registry)
        except ValueError:  # malformed signature bytes
            return False
        return signer.lower() == self.signer_of(miner).lower()

    def check_signature(
        self, miner: str, signature: bytes, commitment: ResultCommitment, parties: Parties | None = None
    ) -> bool:
        """Whether `signature` is over the commitment for `miner` by the signer it accepted the task with (the
        one the contract checks, whatever the miner registers later); False for a miner the task does not
        have, or one that revoked that signer for the task. `parties` is the task's, read once by a caller
        that checks several signatures (by default read here)."""
        parties = parties or self.parties(commitment.task_id)
        index = parties.index_of(miner)
        if index is None or parties.revoked(index):
            return False  # a revoked signer's signature the contract refuses
        chain_id = self.market.w3.eth.chain_id
        registry = self.market.deployment.task_registry
        recovered = recover_signer(signature, commitment, miner, chain_id, registry)
        return recovered.lower() == parties.signers[index].lower()
