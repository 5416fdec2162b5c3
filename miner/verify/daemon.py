"""`arbitration verify`'s loop. A staked verifier watches the chain for disputes and committed tasks. It draws
juries whose seed block exists; on a jury it sits on, it fetches the disputed lines from the coordinator,
checks that they hash to the leaf the chain holds, re-scores the claimed output with the reference model in
one teacher-forced pass, commits its vote, and reveals it in the reveal phase; it resolves disputes whose last
phase has ended. When a randomly audited line fails, it opens the audit on the owner's behalf; so it does when
the line passes alone but a miner accountable for it scores as a cheaper copy of the model over its window of
audited lines (miner_scores), and on an audit's jury it votes by the same rule; a round that acquits the line
of an audit it opened it appeals, if it still finds the line at fault and the bond is within its bound. An
audit someone else opened it follows: it adds the accountable miners the opener left out, publishes the line
if the opener did not (and judges an audit without evidence from the coordinator's audit line), and settles
the audit once its dispute is resolved. Once any dispute ends it reweighs the jurors its penalties left with
less stake than their weight. Every decision is logged with its numbers.

Nothing here trusts the coordinator: a line counts only if it hashes to the on-chain leaf (and, for an audit,
if its proof leads to the committed root). No state is kept on disk: a vote's salt is derived from the
verifier's own signature over the dispute and round, so a restarted verifier can still reveal what it
committed; its windows of audited lines start empty again, so until they refill it judges lines one by one.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import torch
from eth_account.messages import encode_defunct
from web3 import Web3

from client_sdk import openai_batch
from client_sdk.chain.contracts import Market
from client_sdk.chain.types import LAST_ROUND, Dispute, DisputeStatus, Phase, Round, Vote
from client_sdk.encoding import hex_bytes
from client_sdk.errors import ChainError, UserError
from client_sdk.http import json_of
from client_sdk.protocol.model_identity import describe as describe_model
from client_sdk.protocol.model_identity import model_hash
from client_sdk.protocol.task import TaskStatus
from client_sdk.results import ResultLeaf
from client_sdk.verify import Proof, ServedProofs, answers, is_input_line, proven_leaf, result_leaf
from miner.model.config import ModelConfig
from miner.pipeline.batch import load_tokenizer, stop_token_ids
from miner.verify.claims import claim_for
from miner.verify.miner_scores import SUSPECT_SCORE, WINDOW_TOKENS, MinerScores
from miner.verify.policy import DEFAULT_TOLERANCES, LineStats, Tolerances, Verdict, count_fault, judge
from miner.verify.rescore import Rescorer

log = logging.getLogger("batchmarket.verifier")
MAX_NEW_PER_STEP = 256  # new disputes and tasks taken on per step: a backlog is worked off over steps
DONE_TASK = (TaskStatus.FINALIZED, TaskStatus.EXPIRED, TaskStatus.CANCELLED)
BLOCKHASH_WINDOW = 256  # blocks whose hash the EVM keeps: a round undrawn by then can only be resolved


class LineJudge:
    """Verdicts on committed result lines: the leaf's token counts held against the claim re-derived as the
    miner prepared it (prompt, seed, stop tokens), then the claim re-scored and judged by the documented
    policy."""

    def __init__(
        self, rescorer: Rescorer, model_dir: Path, tolerances: Tolerances = DEFAULT_TOLERANCES
    ) -> None:
        self.rescorer = rescorer
        self.model_hash = model_hash(model_dir)  # a task for another model is not this judge's to judge
        self.tokenizer = load_tokenizer(model_dir)
        self.config = ModelConfig.load(model_dir)
        self.stops = stop_token_ids(self.tokenizer, model_dir)
        self.tolerances = tolerances

    @classmethod
    def load(cls, model_dir: Path, device: str = "cpu", dtype: torch.dtype = torch.float32) -> LineJudge:
        return cls(Rescorer.load(model_dir, device, dtype), model_dir)

    def verdict(self, leaf: ResultLeaf, request_line: dict[str, Any], result_line: dict[str, Any]) -> Verdict:
        """The verdict on the result line committed as `leaf`, which answers `request_line` (the caller has
        checked both bindings): its token counts first, then its output by re-scoring."""
        if result_line.get("response") is None:  # an error line: no miner claims an output
            fault = count_fault(leaf, None)
            return Verdict(False, fault) if fault else Verdict(True, "error_line")
        try:
            request = openai_batch.parse_line(json.dumps(request_line), leaf.request_index + 1)
            claim = claim_for(request, result_line, self.tokenizer, self.config, self.stops, leaf.task_id)
        except (UserError, ValueError) as exc:
            return Verdict(False, f"unverifiable: {exc}")
        fault = count_fault(leaf, claim)
        if fault:  # wrong counts overcharge whatever the output: no need to re-score
            return Verdict(False, fault)
        [verdict] = judge(self.rescorer, [claim], self.tolerances)
        return verdict


def describe(verdict: Verdict) -> str:
    """The verdict's reason, with the re-scoring's numbers when it was decided by re-scoring."""
    if verdict.stats is None:
        return verdict.reason
    where = f" at output token {verdict.position}" if verdict.position is not None else ""
    stats = verdict.stats
    return (
        f"{verdict.reason}{where} (logit gap {verdict.gap:.3f}, rank {verdict.rank}, "
        f"mean logprob {verdict.mean_logprob:.3f}, {stats.mismatches} of {stats.tokens} tokens not the "
        "reference's choice)"
    )


@dataclass(frozen=True)
class Judgement:
    """A verifier's verdict on one line by itself, with the re-scoring's counts when it was re-scored."""

    vote: Vote
    reason: str
    stats: LineStats | None = None


@dataclass
class Watching:
    next_dispute: int = 1
    next_task: int = 1
    disputes: set[int] = field(default_factory=set)
    tasks: set[int] = field(default_factory=set)
    judged: set[int] = field(default_factory=set)  # tasks whose audited line this verifier judged
    followed: set[int] = field(default_factory=set)  # audit disputes this verifier completed
    abandoned: set[int] = field(default_factory=set)  # audit disputes that ended without a jury


class Verifier:
    """One verifier: its market binding signs its votes, `coordinator` is an httpx client signed by the same
    wallet. `step()` does one pass over everything new or pending."""

    def __init__(
        self,
        market: Market,
        coordinator: httpx.Client,
        judge: LineJudge,
        audits: bool = True,
        max_appeal_bond: int | None = None,
    ) -> None:
        assert market.transactor is not None, "a verifier signs its votes"
        self.market = market
        self.address = market.transactor.account.address
        self.coordinator = coordinator
        self.judge = judge
        self.audits = audits
        self.max_appeal_bond = max_appeal_bond  # None: the task's stake lock
        self.watching = Watching()
        self._appeals: set[tuple[int, int]] = set()  # (dispute, round) appealed or refused once
        self.scores = MinerScores()  # of the miners whose audited lines this verifier judged

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
        """Moves the dispute on by one step where this verifier can: draws its jury, commits or reveals this
        verifier's vote, resolves it; True once it is resolved."""
        arbitration = self.market.arbitration
        record = arbitration.get_dispute(dispute_id)
        if record.status != DisputeStatus.OPEN:
            self._reweigh_penalized(dispute_id, record)
            return True
        now = self.market.chain_time()
        current = arbitration.round_of(dispute_id, record.round)
        phase = current.phase(now)
        if phase == Phase.DRAWING:
            block = self.market.w3.eth.block_number
            if block > current.seed_block + BLOCKHASH_WINDOW:  # the seed is gone: the round can only end
                self._attempt(f"resolve dispute {dispute_id}", arbitration.resolve, dispute_id)
            elif block > current.seed_block:
                self._attempt(f"draw the jury of dispute {dispute_id}", arbitration.draw_jury, dispute_id)
        elif phase == Phase.COMMIT:
            self._commit(dispute_id, record, now, current.commit_deadline)
        elif phase == Phase.REVEAL:
            self._reveal(dispute_id, record.round)
        elif phase == Phase.APPEAL and record.round < LAST_ROUND:
            self._appeal_acquittal(dispute_id, record, current)
        elif phase == Phase.OVER or record.round == LAST_ROUND:
            self._attempt(f"resolve dispute {dispute_id}", arbitration.resolve, dispute_id)
        return False

    def _appeal_acquittal(self, dispute_id: int, record: Dispute, current: Round) -> None:
        """Appeals a round that acquitted the line of an audit this verifier opened, when it still judges
        the line at fault: the cost to corrupt a jury assumes the losing side appeals while it can, and for an
        audit that side is its opener. Once a round; the appeal's bond (twice the round's) must be within the
        bound (the task's stake lock, which the conviction would take, or `max_appeal_bond`)."""
        key = (dispute_id, record.round)
        correct, at_fault = current.votes_correct, current.votes_at_fault
        if not record.audit or record.opener != self.address or key in self._appeals or correct <= at_fault:
            return
        what = f"dispute {dispute_id} (the audit of task {record.task_id} line {record.request_index})"
        evidence = self._get(f"/v1/disputes/{dispute_id}/evidence") or self._get(
            f"/v1/audits/{record.task_id}"
        )
        judged = None if evidence is None else self._judge(dispute_id, record, evidence)
        if judged is None:
            return  # the line cannot be judged now (logged): tried again next pass
        self._appeals.add(key)
        need = 2 * current.bond
        if judged[0] != Vote.MINERS_AT_FAULT:
            refusal: str | None = f"this verifier now finds the line correct ({judged[1]})"
        else:
            refusal = self.market.appeal_bond_refusal(record.task_id, need, self.max_appeal_bond)
        if refusal is not None:
            log.warning("%s round %d acquitted the miners; not appealing: %s", what, record.round, refusal)
            return
        try:
            self.market.appeal_paying(dispute_id, need)
        except (UserError, ChainError) as exc:
            self._appeals.discard(key)  # tried again next pass, while the appeal phase lasts
            log.warning("%s: the appeal failed (%s)", what, exc)
            return
        log.warning(
            "%s round %d acquitted the miners %d seats to %d, but the line is at fault (%s): appealed "
            "(bond %s)",
            what,
            record.round,
            correct,
            at_fault,
            judged[1],
            self.market.amount(need),
        )

    def _reweigh_penalized(self, dispute_id: int, record: Dispute) -> None:
        """Once a dispute has ended, lowers the weight of each of its jurors (and its opener, an audit's) that
        its penalties left with less stake than its weight was set with: weight without stake behind it loses
        every draw that lands on it, and a pool full of it draws juries, appeals among them, short. Anyone may
        reweigh; every penalty is taken by some dispute's end, which this verifier watches."""
        arbitration, verifiers = self.market.arbitration, self.market.verifiers
        accounts = {record.opener}
        for r in range(record.round + 1):
            accounts.update(arbitration.jurors_of(dispute_id, r))
        for account in sorted(accounts):
            if verifiers.needs_reweigh(account):
                self._attempt(f"reweigh verifier {account}", verifiers.reweigh, account)

    def _attempt(self, what: str, action: Any, *args: Any) -> None:
        """Runs a chain action anyone may take; another party may have taken it first, so a refusal is only
        logged."""
        try:
            action(*args)
            log.info("%s: done", what)
        except (UserError, ChainError) as exc:
            log.info("%s: not now (%s)", what, exc)

    def _commit(self, dispute_id: int, record: Dispute, now: int, deadline: int) -> None:
        """Commits this verifier's sealed vote if it sits on the current round and has not committed yet.
        Without published evidence it waits until half the commit phase is left, then presumes the miners
        correct: the challenger has not shown the line."""
        arbitration = self.market.arbitration
        seat = arbitration.juror_of(dispute_id, record.round, self.address)
        if seat.seats == 0 or any(seat.commitment):
            return
        evidence = self._get(f"/v1/disputes/{dispute_id}/evidence")
        if evidence is None and record.audit:  # the opener kept quiet: the coordinator has the audited line
            evidence = self._get(f"/v1/audits/{record.task_id}")
        if evidence is None:
            if now < deadline - record.terms.phase // 2:
                return
            choice, reason = Vote.MINERS_CORRECT, "no evidence was published: the line is presumed correct"
        else:
            judged = self._judge(dispute_id, record, evidence)
            if judged is None:
                return
            choice, reason = judged
        salt = self._salt(dispute_id, record.round)
        commitment = arbitration.vote_commitment(dispute_id, record.round, self.address, choice, salt)
        arbitration.commit_vote(dispute_id, commitment)
        log.info(
            "dispute %d round %d (task %d line %d, %d seat(s)): committed %s: %s",
            dispute_id,
            record.round,
            record.task_id,
            record.request_index,
            seat.seats,
            choice.name.lower(),
            reason,
        )

    def _judge(self, dispute_id: int, record: Dispute, evidence: dict[str, Any]) -> tuple[Vote, str] | None:
        """The vote the evidence calls for, or None (logged) when the result line does not hash to the
        disputed leaf or the request line is not proven to be the task's input line at its position."""
        request_line, result_line = evidence["request_line"], evidence["result_line"]
        try:
            leaf = result_leaf(record.task_id, result_line)
            input_proof = [hex_bytes(p) for p in evidence.get("input_proof") or []]
            leaf_hash = leaf.hash()
        except (KeyError, TypeError, ValueError) as exc:
            log.warning("dispute %d: malformed evidence (%s); not voting", dispute_id, exc)
            return None
        if leaf_hash != record.leaf_hash:
            log.warning("dispute %d: the evidence does not hash to the disputed leaf; not voting", dispute_id)
            return None
        judged = self._vote_on(
            record.task_id, leaf, request_line, result_line, input_proof, f"dispute {dispute_id}"
        )
        if judged is None or not record.audit:  # an owner picks the lines it disputes: they are not scored
            return None if judged is None else (judged.vote, judged.reason)
        accountable = self.market.arbitration.pipeline_of(dispute_id)
        return self._audited(record.task_id, leaf, accountable, judged)

    def _vote_on(
        self,
        task_id: int,
        leaf: ResultLeaf,
        request_line: dict[str, Any],
        result_line: dict[str, Any],
        input_proof: list[bytes],
        what: str,
    ) -> Judgement | None:
        """The verdict on a committed leaf by itself: at fault when it answers another request than the task's
        input line at its position (checked against the input root on-chain), else by the judge (token counts,
        then re-scoring); None (logged) when the request line is not proven to be that input line, or when the
        task is for another model than the checkpoint this verifier re-scores with."""
        task = self.market.tasks.get_task(task_id)
        if bytes(task.model_id) != self.judge.model_hash:
            log.warning(
                "%s: the task is for the model %s, not %s, this verifier's checkpoint; not voting",
                what,
                describe_model(task.model_id),
                describe_model(self.judge.model_hash),
            )
            return None
        if not is_input_line(task.input_root, leaf.request_index, request_line, input_proof):
            log.warning("%s: the request line is not proven to be the task's input line; not voting", what)
            return None
        if not answers(leaf, request_line):
            reason = f"the result answers another request than input line {leaf.request_index}"
            return Judgement(Vote.MINERS_AT_FAULT, reason)
        verdict = self.judge.verdict(leaf, request_line, result_line)
        choice = Vote.MINERS_CORRECT if verdict.passed else Vote.MINERS_AT_FAULT
        return Judgement(choice, describe(verdict), verdict.stats)

    def _audited(
        self, task_id: int, leaf: ResultLeaf, accountable: list[str], judged: Judgement
    ) -> tuple[Vote, str]:
        """The vote on a randomly audited line: its own verdict, except that a line that passes alone is at
        fault when a miner accountable for it is suspect over its window of audited lines (this one in it)."""
        if judged.stats is not None:
            for miner in self.scores.add((task_id, leaf.request_index), accountable, judged.stats):
                log.warning(
                    "miner %s: its last %d audited tokens score %.4f (above %.4f): its lines look like a "
                    "cheaper copy of the model's",
                    miner,
                    WINDOW_TOKENS,
                    self.scores.score(miner),
                    SUSPECT_SCORE,
                )
        suspects = [miner for miner in accountable if self.scores.suspect(miner)]
        if judged.vote == Vote.MINERS_AT_FAULT or not suspects:
            return judged.vote, judged.reason
        miner = suspects[0]
        return Vote.MINERS_AT_FAULT, (
            f"the line passes alone ({judged.reason}), but miner {miner}'s last {WINDOW_TOKENS} audited "
            f"tokens score {self.scores.score(miner):.4f}, above {SUSPECT_SCORE}: a cheaper copy of the model"
        )

    def _reveal(self, dispute_id: int, round_index: int) -> None:
        """Reveals the vote this verifier committed in the round: the one of the two whose commitment, with
        the re-derived salt, matches the chain's."""
        arbitration = self.market.arbitration
        seat = arbitration.juror_of(dispute_id, round_index, self.address)
        if seat.seats == 0 or seat.vote != Vote.NONE or not any(seat.commitment):
            return
        salt = self._salt(dispute_id, round_index)
        for choice in (Vote.MINERS_CORRECT, Vote.MINERS_AT_FAULT):
            if (
                arbitration.vote_commitment(dispute_id, round_index, self.address, choice, salt)
                == seat.commitment
            ):
                arbitration.reveal_vote(dispute_id, choice, salt)
                log.info("dispute %d round %d: revealed %s", dispute_id, round_index, choice.name.lower())
                return
        log.warning(
            "dispute %d round %d: the committed vote is not one this wallet sealed", dispute_id, round_index
        )

    def _salt(self, dispute_id: int, round_index: int) -> bytes:
        """Secret until revealed, and the same after a restart: the hash of this wallet's signature over the
        chain, the contract, the dispute and the round."""
        assert self.market.transactor is not None
        text = (
            f"batchmarket jury vote salt: chain {self.market.w3.eth.chain_id}, arbitration "
            f"{self.market.arbitration.address}, dispute {dispute_id}, round {round_index}"
        )
        signed = self.market.transactor.account.sign_message(encode_defunct(text=text))
        return bytes(Web3.keccak(signed.signature))

    # -- random audits

    def _audit_settled(self, task_id: int) -> bool:
        """Draws, seals and, if selected, re-scores a committed task's audit line; follows an audit someone
        opened (adding the accountable miners its opener left out, publishing the evidence it kept back) and
        settles it once its dispute is resolved; True when done with it (the dispute itself is followed as a
        dispute)."""
        task = self.market.tasks.get_task(task_id)
        audits, arbitration = self.market.audits, self.market.arbitration
        if task.status in DONE_TASK:
            audit = audits.audit_of(task_id)
            if not audit.dispute_id or audit.settled:
                return True
            return self._opened_audit_settled(
                task_id, audit.dispute_id, arbitration.get_dispute(audit.dispute_id)
            )
        if task.status not in (TaskStatus.RESULTS_COMMITTED, TaskStatus.DISPUTED):
            return False  # not committed yet
        audit = audits.audit_of(task_id)
        if audit.dispute_id:
            record = arbitration.get_dispute(audit.dispute_id)
            if not self._abandoned(audit.dispute_id, record):
                return audit.settled or self._opened_audit_settled(task_id, audit.dispute_id, record)
            if audit.dispute_id not in self.watching.abandoned:  # its opener never drew a jury: judged again,
                self.watching.abandoned.add(audit.dispute_id)  # and opened again if it fails
                self.watching.judged.discard(task_id)
        if audit.seed_block == 0:
            in_window = self.market.chain_time() < self.market.tasks.challenge_ends_at(task_id)
            if task.status != TaskStatus.RESULTS_COMMITTED or not in_window:
                return not in_window
            if arbitration.config_of(task_id).audit_rate_bps == 0:
                return True
            audits.draw_audit(task_id)
            return False
        if not audit.sealed:
            try:
                audit = audits.seal_audit(task_id)
            except UserError as exc:  # too early: the seed's block is not mined yet
                log.debug("task %d: cannot seal its audit yet: %s", task_id, exc)
                return False
            if not audit.sealed:  # its seed had expired: drawn again, and selected whatever it says
                log.info("task %d: its audit seed expired unsealed; drawn again, forced selected", task_id)
                return False
        if not audit.selected:
            return True
        if task_id not in self.watching.judged and self._audit(task_id):
            self.watching.judged.add(task_id)
        return False  # watched until its audit is opened and settled, or the task is done

    def _abandoned(self, dispute_id: int, record: Dispute) -> bool:
        """The audit's dispute (`record`) ended without a jury (round 0 seated nobody: never drawn, or no
        weight but a party's): anyone may open the audit again (`Audits._abandoned`)."""
        if record.status != DisputeStatus.NO_DECISION:
            return False
        return self.market.arbitration.round_of(dispute_id, 0).seats_drawn == 0

    def _opened_audit_settled(self, task_id: int, dispute_id: int, record: Dispute) -> bool:
        """An opened, unsettled audit: while its dispute (`record`) runs, completes it from the coordinator's
        audit line (once); once resolved, settles it (anyone may: it frees the opener's seat). True when
        nothing is left."""
        if record.status == DisputeStatus.OPEN:
            if dispute_id not in self.watching.followed:
                self.watching.followed.add(dispute_id)
                self._follow(task_id, dispute_id)
            return False
        self._attempt(f"settle the audit of task {task_id}", self.market.audits.settle_audit, task_id)
        return True

    def _follow(self, task_id: int, dispute_id: int) -> None:
        """Joins the accountable miners the audit's opener did not prove, and publishes the audited line as
        its evidence if its opener did not: whoever opens an audit first must not decide who answers for the
        line, nor what the jurors see."""
        line = self._get(f"/v1/audits/{task_id}")
        if line is None:
            return
        try:
            leaf, proof, served_proofs = proven_leaf(task_id, line["result_line"])
            accountable = self.market.tasks.accountable_for(leaf, proof, served_proofs)
        except (KeyError, TypeError, ValueError, UserError) as exc:
            log.warning("task %d: cannot follow its audit from the coordinator's line (%s)", task_id, exc)
            return
        missing = set(accountable) - set(self.market.arbitration.pipeline_of(dispute_id))
        if missing:
            self._attempt(
                f"join {sorted(missing)} to the audit of task {task_id} (dispute {dispute_id})",
                self.market.arbitration.join_dispute,
                dispute_id,
                leaf,
                proof,
                served_proofs,
            )
        if self._get(f"/v1/disputes/{dispute_id}/evidence") is None:
            body = {key: line[key] for key in ("request_line", "result_line", "input_proof")}
            self._post(f"/v1/disputes/{dispute_id}/evidence", body | {"reason": "audit: the audited line"})

    def _audit(self, task_id: int) -> bool:
        """Judges the audited line and opens its audit if it fails; False while the coordinator cannot serve
        the line yet."""
        line = self._get(f"/v1/audits/{task_id}")
        if line is None:
            return False
        request_line, result_line = line["request_line"], line["result_line"]
        try:
            leaf, proof, served_proofs = proven_leaf(task_id, result_line)
            input_proof = [hex_bytes(p) for p in line["input_proof"]]
        except (KeyError, TypeError, ValueError) as exc:
            log.warning("task %d: malformed audit line from the coordinator (%s)", task_id, exc)
            return True
        try:
            accountable = self.market.tasks.accountable_for(leaf, proof, served_proofs)
        except UserError as exc:  # ContractRevert: not the committed leaf, or no miner vouched for it
            log.warning("task %d: the coordinator's audit line cannot be audited on-chain (%s)", task_id, exc)
            return True
        judged = self._vote_on(task_id, leaf, request_line, result_line, input_proof, f"task {task_id} audit")
        if judged is None:
            return True
        choice, reason = self._audited(task_id, leaf, accountable, judged)
        if choice == Vote.MINERS_CORRECT:
            log.info("task %d line %d: audit passed: %s", task_id, leaf.request_index, reason)
            return True
        evidence = {
            "request_line": request_line,
            "result_line": result_line,
            "input_proof": line["input_proof"],
            "reason": f"audit: {reason}",
        }
        try:
            dispute_id = self._escalate(leaf, (proof, served_proofs), evidence)
        except (UserError, ChainError) as exc:  # a party of the task, or another verifier opened it first
            log.info(
                "task %d line %d: audit failed, but not opened here (%s)", task_id, leaf.request_index, exc
            )
            return True
        log.info(
            "task %d line %d: audit failed, opened dispute %d: %s",
            task_id,
            leaf.request_index,
            dispute_id,
            reason,
        )
        return True

    def _escalate(self, leaf: ResultLeaf, proofs: tuple[Proof, ServedProofs], body: dict[str, Any]) -> int:
        """Opens the audit dispute on-chain and publishes its evidence."""
        dispute_id = self.market.audits.open_audit(leaf, *proofs)
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
        body: dict[str, Any] = json_of(response)
        return body

    def _post(self, path: str, body: dict[str, Any]) -> None:
        response = self.coordinator.post(path, json=body)
        if not response.is_success:
            log.warning("publishing %s failed: HTTP %d %s", path, response.status_code, response.text[:200])
