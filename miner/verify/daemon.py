"""`arbitration verify`'s loop. A staked verifier watches the chain for disputes and committed tasks, fetches
the lines in question from the coordinator, checks that they hash to the leaf the chain holds, re-scores the
claimed output with the reference model in one teacher-forced pass, and then votes (a dispute) or, when a
randomly audited line fails, opens the audit on the owner's behalf. Every decision is logged with its numbers.

Nothing here trusts the coordinator: a line counts only if it hashes to the on-chain leaf (and, for an audit,
if its proof leads to the committed root).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import torch

from client_sdk import openai_batch
from client_sdk.chain.contracts import Market
from client_sdk.chain.types import DisputeStatus, TaskStatus, Vote
from client_sdk.errors import UserError
from client_sdk.results import PROOF_KEY, ResultLeaf
from client_sdk.verify import result_leaf
from miner.model.config import ModelConfig
from miner.pipeline.batch import load_tokenizer, stop_token_ids
from miner.verify.claims import claim_for
from miner.verify.policy import DEFAULT_TOLERANCES, Tolerances, Verdict, judge
from miner.verify.rescore import Rescorer

log = logging.getLogger("batchmarket.verifier")
MAX_NEW_PER_STEP = 256  # new disputes and tasks taken on per step: a backlog is worked off over steps
DONE_TASK = (TaskStatus.FINALIZED, TaskStatus.EXPIRED, TaskStatus.CANCELLED, TaskStatus.DISPUTED)


class LineJudge:
    """Verdicts on (request line, result line) pairs: the claim re-derived as the miner prepared it (prompt,
    seed, stop tokens), re-scored, judged by the documented policy."""

    def __init__(
        self, rescorer: Rescorer, model_dir: Path, tolerances: Tolerances = DEFAULT_TOLERANCES
    ) -> None:
        self.rescorer = rescorer
        self.tokenizer = load_tokenizer(model_dir)
        self.config = ModelConfig.load(model_dir)
        self.stops = stop_token_ids(self.tokenizer, model_dir)
        self.tolerances = tolerances

    @classmethod
    def load(cls, model_dir: Path, device: str = "cpu", dtype: torch.dtype = torch.float32) -> LineJudge:
        return cls(Rescorer.load(model_dir, device, dtype), model_dir)

    def verdict(self, index: int, request_line: dict[str, Any], result_line: dict[str, Any]) -> Verdict:
        if result_line.get("response") is None:  # an error line: no miner claims an output
            return Verdict(True, "error_line")
        try:
            request = openai_batch.parse_line(json.dumps(request_line), index + 1)
            claim = claim_for(request, result_line, self.tokenizer, self.config, self.stops)
        except (UserError, ValueError) as exc:
            return Verdict(False, f"unverifiable: {exc}")
        [verdict] = judge(self.rescorer, [claim], self.tolerances)
        return verdict


def describe(verdict: Verdict) -> str:
    where = f" at output token {verdict.position}" if verdict.position is not None else ""
    return (
        f"{verdict.reason}{where} (logit gap {verdict.gap:.3f}, rank {verdict.rank}, "
        f"mean logprob {verdict.mean_logprob:.3f}, z {verdict.logprob_z:.2f})"
    )


@dataclass
class Watching:
    next_dispute: int = 1
    next_task: int = 1
    disputes: set[int] = field(default_factory=set)
    tasks: set[int] = field(default_factory=set)


class Verifier:
    """One verifier: its market binding signs its votes, `coordinator` is an httpx client signed by the same
    wallet. `step()` does one pass over everything new or pending."""

    def __init__(
        self, market: Market, coordinator: httpx.Client, judge: LineJudge, audits: bool = True
    ) -> None:
        assert market.transactor is not None, "a verifier signs its votes"
        self.market = market
        self.address = market.transactor.account.address
        self.coordinator = coordinator
        self.judge = judge
        self.audits = audits
        self.watching = Watching()

    def step(self) -> None:
        self._watch_new()
        for dispute_id in sorted(self.watching.disputes):
            if self._dispute_settled(dispute_id):
                self.watching.disputes.discard(dispute_id)
        if self.audits:
            for task_id in sorted(self.watching.tasks):
                if self._audit_settled(task_id):
                    self.watching.tasks.discard(task_id)

    def _watch_new(self) -> None:
        w = self.watching
        last_dispute = min(self.market.arbitration.dispute_count(), w.next_dispute + MAX_NEW_PER_STEP - 1)
        w.disputes.update(range(w.next_dispute, last_dispute + 1))
        w.next_dispute = last_dispute + 1
        if self.audits:
            last_task = min(self.market.tasks.task_count(), w.next_task + MAX_NEW_PER_STEP - 1)
            w.tasks.update(range(w.next_task, last_task + 1))
            w.next_task = last_task + 1

    # -- disputes

    def _dispute_settled(self, dispute_id: int) -> bool:
        """Votes on the dispute once its evidence is published; True when there is nothing more to do."""
        arbitration = self.market.arbitration
        record = arbitration.get_dispute(dispute_id)
        if record.status != DisputeStatus.OPEN or self.market.chain_time() >= record.voting_deadline:
            return True
        if arbitration.vote_of(dispute_id, self.address) != Vote.NONE:
            return True
        if not self._eligible(record.opened_at_block):
            log.info("dispute %d: opened before this verifier could vote on it; skipped", dispute_id)
            return True
        evidence = self._get(f"/v1/disputes/{dispute_id}/evidence")
        if evidence is None:
            return False  # not published yet: look again next step
        request_line, result_line = evidence["request_line"], evidence["result_line"]
        try:
            leaf = result_leaf(record.task_id, request_line, result_line)
        except (KeyError, TypeError, ValueError) as exc:
            log.warning("dispute %d: malformed evidence (%s); not voting", dispute_id, exc)
            return True
        if leaf.hash() != record.leaf_hash:
            log.warning("dispute %d: the evidence does not hash to the disputed leaf; not voting", dispute_id)
            return True
        verdict = self.judge.verdict(leaf.request_index, request_line, result_line)
        choice = Vote.MINERS_CORRECT if verdict.passed else Vote.MINERS_AT_FAULT
        arbitration.vote(dispute_id, choice)
        log.info(
            "dispute %d (task %d line %d): voted %s: %s",
            dispute_id,
            record.task_id,
            leaf.request_index,
            choice.name.lower(),
            describe(verdict),
        )
        return True

    def _eligible(self, opened_at_block: int) -> bool:
        me = self.market.arbitration.verifier_of(self.address)
        exited_before = me.exit_at_block != 0 and me.exit_at_block <= opened_at_block
        return me.registered and me.registered_at_block < opened_at_block and not exited_before

    # -- random audits

    def _audit_settled(self, task_id: int) -> bool:
        """Draws, seals and, if selected, re-scores a committed task's audit line; True when done with it."""
        task = self.market.tasks.get_task(task_id)
        if task.status in DONE_TASK:
            return True
        if task.status != TaskStatus.RESULTS_COMMITTED:
            return False  # not committed yet
        arbitration = self.market.arbitration
        if self.market.chain_time() >= task.committed_at + self.market.tasks.challenge_window():
            return True
        if arbitration.dispute_of_task(task_id):
            return True  # one dispute per task: its owner's, or another verifier's audit
        audit = arbitration.audit_of(task_id)
        if audit.draw_block == 0:
            if arbitration.audit_rate_bps() == 0:
                return True
            arbitration.draw_audit(task_id)
            return False
        if not audit.sealed:
            try:
                audit = arbitration.seal_audit(task_id)
            except UserError as exc:  # too early (the seed's block is not mined yet), or expired
                log.debug("task %d: cannot seal its audit yet: %s", task_id, exc)
                return False
        if not audit.selected:
            return True
        return self._audit(task_id, task.results_root)

    def _audit(self, task_id: int, results_root: bytes) -> bool:
        line = self._get(f"/v1/audits/{task_id}")
        if line is None:
            return False
        request_line, result_line = line["request_line"], line["result_line"]
        try:
            leaf = result_leaf(task_id, request_line, result_line)
            proof = [bytes.fromhex(p.removeprefix("0x")) for p in result_line[PROOF_KEY]["proof"]]
        except (KeyError, TypeError, ValueError) as exc:
            log.warning("task %d: malformed audit line from the coordinator (%s)", task_id, exc)
            return True
        if not self.market.arbitration.verify_leaf(results_root, leaf, proof):
            log.warning("task %d: the coordinator's audit line is not in the committed root", task_id)
            return True
        verdict = self.judge.verdict(leaf.request_index, request_line, result_line)
        if verdict.passed:
            log.info("task %d line %d: audit passed: %s", task_id, leaf.request_index, describe(verdict))
            return True
        dispute_id = self._escalate(leaf, proof, request_line, result_line, verdict)
        log.info(
            "task %d line %d: audit failed, opened dispute %d: %s",
            task_id,
            leaf.request_index,
            dispute_id,
            describe(verdict),
        )
        return True

    def _escalate(
        self,
        leaf: ResultLeaf,
        proof: list[bytes],
        request_line: dict[str, Any],
        result_line: dict[str, Any],
        verdict: Verdict,
    ) -> int:
        dispute_id = self.market.arbitration.open_audit(leaf, proof)
        body = {
            "request_line": request_line,
            "result_line": result_line,
            "reason": f"audit: {describe(verdict)}",
        }
        self._post(f"/v1/disputes/{dispute_id}/evidence", body)
        return dispute_id

    # -- the coordinator

    def _get(self, path: str) -> dict[str, Any] | None:
        """The object at `path`; None while the coordinator lacks it (404/409) or cannot be reached."""
        try:
            response = self.coordinator.get(path)
        except httpx.TransportError as exc:
            log.warning("coordinator unreachable: %s", exc)
            return None
        if response.status_code in (404, 409):
            return None
        response.raise_for_status()
        body: dict[str, Any] = response.json()
        return body

    def _post(self, path: str, body: dict[str, Any]) -> None:
        response = self.coordinator.post(path, json=body)
        if not response.is_success:
            log.warning("publishing %s failed: HTTP %d %s", path, response.status_code, response.text[:200])
