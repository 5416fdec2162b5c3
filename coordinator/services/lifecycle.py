"""A batch's life, one idempotent step at a time. `advance` looks at where the batch is and does the next
thing; running it twice, or after a crash half-way, does no harm (each step checks the chain and the database
before acting), which is what lets Celery acknowledge late and retry freely.

validating -> (task checked on-chain, pipelines planned, task assigned) -> in_progress
in_progress -> (units dispatched, silent heads' units re-routed) -> finalizing when every line has a result
cancelling -> finalizing with the results so far (or cancelled when there are none: the task is released
              on-chain, refunding its owner at once)
finalizing -> (output and error files, results tree, the signature of every miner paid) -> commit on-chain
           -> in_progress again when a miner that must sign is gone for good (its lines are served again)
           -> completed (or cancelled)
completed/cancelled -> the owner's line challenges answered -> finalizeTask once the challenge window passed
any active batch past its task's deadline -> expireTask (full refund) -> expired
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from client_sdk.eip712 import ResultCommitment
from client_sdk.encoding import hex_bytes
from client_sdk.inputs import custom_id_hash
from client_sdk.protocol import settlement
from client_sdk.protocol.constants import ACTIVE_BATCH_STATUSES, MAX_MINERS_PER_TASK, SETTLING_BATCH_STATUSES
from client_sdk.protocol.task import Task, TaskStatus
from client_sdk.results import PROOF_KEY, LineProof, ResultLeaf, ResultTrees
from client_sdk.units import format_amount
from coordinator.chain import CoordinatorChain, Parties
from coordinator.config import ServedModel, Settings
from coordinator.db.models import (
    Batch,
    File,
    FileContent,
    Miner,
    PipelineRecord,
    Request,
    Result,
    Signature,
    WorkUnit,
)
from coordinator.services import acceptances, challenges, dispatch
from coordinator.services.batches import task_mismatches
from coordinator.services.ids import new_id
from coordinator.services.live import LiveMembership
from coordinator.services.miners import live_miners
from coordinator.services.planning import ensure_plan


@dataclass(frozen=True)
class Context:
    settings: Settings
    chain: CoordinatorChain
    live: LiveMembership


def advance(session: Session, ctx: Context, batch_id: str) -> str:
    """Runs the next step of the batch; returns its status afterwards. The on-chain task is read once, here,
    and handed to the step."""
    batch = session.get(Batch, batch_id, with_for_update=True)
    if batch is None:
        return "missing"
    # two clocks: deadlines and windows are the chain's; leases and the batch's timestamps are the wall's
    chain_now, now = ctx.chain.now(), int(time.time())
    task = ctx.chain.task(batch.task_id)
    if (
        batch.status in ACTIVE_BATCH_STATUSES
        and chain_now > task.deadline
        and task.status in (TaskStatus.OPEN, TaskStatus.ASSIGNED)
    ):
        ctx.chain.expire(batch.task_id)
        _set(batch, "expired", now)
    elif batch.status == "validating":
        _validate_and_assign(session, ctx, batch, task, now)
    elif batch.status == "in_progress":
        _run(session, ctx, batch, now)
    elif batch.status == "cancelling":
        _stop(session, batch, now)
    elif batch.status == "finalizing":
        _finalize(session, ctx, batch, task, now)
    elif batch.status == "cancelled" and batch.commit_tx is None and not batch.finalized:
        # nothing was served: give the task up on-chain, which refunds its owner (an Open task now, an
        # Assigned one after the contract's notice, unless its miners vouched for results meanwhile: then they
        # commit them, or it expires). A release that loses a race with the owner's cancel reverts, and the
        # retry finds the task cancelled.
        if task.status == TaskStatus.OPEN or (
            task.status == TaskStatus.ASSIGNED and ctx.chain.release_due(batch.task_id, chain_now)
        ):
            ctx.chain.release(batch.task_id)
            batch.finalized = True
        elif task.status != TaskStatus.ASSIGNED:
            batch.finalized = True
    elif batch.status in SETTLING_BATCH_STATUSES and batch.commitment is not None and not batch.finalized:
        # a challenge holds the task as a dispute does: answer the owner's before anything else
        open_lines = ctx.chain.open_challenges(batch.task_id) if task.status == TaskStatus.DISPUTED else []
        if open_lines:
            challenges.answer(ctx.chain, batch.task_id, open_lines, result_trees(session, batch)[1])
        if task.status == TaskStatus.RESULTS_COMMITTED and chain_now >= ctx.chain.challenge_ends_at(
            batch.task_id
        ):
            ctx.chain.finalize(batch.task_id)
        batch.finalized = task.status == TaskStatus.FINALIZED
    return batch.status


def _set(batch: Batch, status: str, now: int) -> None:
    batch.status = status
    setattr(batch, f"{status}_at", now)


def _fail(ctx: Context, batch: Batch, task: Task, errors: list[dict[str, Any]], now: int) -> None:
    """Fails the batch before any line ran and, if its task is still open, gives the task up on-chain: the
    owner can withdraw the whole escrow at once instead of at the deadline. The release comes first: if it
    does not go through, the batch stays validating and the next sweep tries again."""
    if task.status == TaskStatus.OPEN:
        ctx.chain.release(batch.task_id)
    batch.errors = errors
    _set(batch, "failed", now)


def task_problems(batch: Batch, file: File, task: Task, served: ServedModel) -> list[str]:
    """Why the on-chain task does not back this batch (empty when it does); `served` is the model the batch
    names, as this coordinator serves it (its hash must be the task's model id). Checked when the batch was
    created too; again here, as the model served under a name may have changed since."""
    mismatched = task_mismatches(
        task, batch.owner, file, batch.endpoint, batch.completion_window, served.model_hash
    )
    problems = [f"task {batch.task_id}: the {name} does not match the batch" for name in mismatched]
    if task.status != TaskStatus.OPEN and not (task.status == TaskStatus.ASSIGNED and batch.miners):
        problems.append(f"task {batch.task_id} is {task.status.name.lower()}, not open")
    return problems


def _validate_and_assign(session: Session, ctx: Context, batch: Batch, task: Task, now: int) -> None:
    served = ctx.settings.model(batch.model)
    if served is None:
        errors = [
            {
                "code": "model_not_found",
                "message": f"{batch.model} is no longer served",
                "param": None,
                "line": None,
            }
        ]
        _fail(ctx, batch, task, errors, now)
        return
    file = session.get(File, batch.input_file_id)
    assert file is not None
    if task.status == TaskStatus.NONE:
        problems = [f"task {batch.task_id} does not exist on-chain"]
    else:
        problems = task_problems(batch, file, task, served)
    if problems:
        errors = [{"code": "invalid_task", "message": p, "param": "task_id", "line": None} for p in problems]
        _fail(ctx, batch, task, errors, now)
        return
    live, pipelines = _plan(session, ctx, served, now)
    if not pipelines:  # wait for miners; the deadline check expires the batch if none come
        batch.status_detail = (
            f"waiting for miners: the {len(live)} live miner(s) cannot hold a replica of {batch.model} "
            "(the escrow comes back if none can by the task's deadline)"
        )
        return
    if task.status == TaskStatus.OPEN:
        if not _assign_with_consent(session, ctx, batch, task, pipelines, live, now):
            return  # a failure is recorded on the batch; otherwise the miners have yet to accept
    elif batch.miners is None:  # assigned on-chain by us before a crash: adopt what the chain says
        batch.miners = ctx.chain.market.tasks.miners_of(batch.task_id)
    assert batch.miners is not None
    usable = made_of(pipelines, batch.miners)
    if not usable:  # only the task's own miners can be paid for it: wait for a pipeline made of them
        batch.status_detail = _no_pipeline_reason(batch, live)
        return
    if not session.scalar(select(WorkUnit.id).where(WorkUnit.batch_id == batch.id).limit(1)):
        dispatch.create_units(session, ctx.live, batch, usable, ctx.settings.work_unit_size, now)
    batch.status_detail = None
    _set(batch, "in_progress", now)


def _assign_with_consent(
    session: Session,
    ctx: Context,
    batch: Batch,
    task: Any,
    pipelines: list[PipelineRecord],
    live: list[Miner],
    now: int,
) -> bool:
    """Proposes the assignment to its miners, or assigns it on-chain once all of them accepted; True when the
    task is assigned. A proposal that expires unanswered is made afresh from the current plan."""
    chain_now = ctx.chain.now()
    if batch.proposal is None or chain_now > batch.proposal["expiry"]:
        terms = ctx.chain.terms(batch.task_id)
        room = stake_lock_room(task.max_price, terms.min_stake_lock, terms.max_value_at_risk)
        miners = assigned_miners(pipelines, [m.address for m in live], room)
        if miners is None:
            errors = [
                {
                    "code": "value_cap",
                    "message": (
                        f"the max price leaves room for the stake locks of {room} miner(s), but a pipeline "
                        f"needs more: a task may put at most {format_amount(terms.max_value_at_risk)} tokens "
                        "at stake "
                        "(max price plus every miner's stake lock); lower the max price or split the batch"
                    ),
                    "param": "max_price",
                    "line": None,
                }
            ]
            _fail(ctx, batch, task, errors, now)
            return False
        acceptances.propose(session, batch, miners, terms.min_stake_lock, chain_now)
        batch.status_detail = f"waiting for {len(miners)} miner(s) to accept the task and its stake lock"
        return False
    signed = acceptances.collected(session, batch)
    if signed is None:
        return False
    miners = list(batch.proposal["miners"])
    ctx.chain.assign(batch.task_id, miners, batch.proposal["stake_lock"], signed)
    batch.miners = miners
    batch.status_detail = None
    return True


def stake_lock_room(max_price: int, stake_lock: int, max_value_at_risk: int) -> int:
    """How many miners' stake locks fit beside the maximum price under the task's value cap."""
    if max_price > max_value_at_risk:
        return 0
    if stake_lock == 0:
        return MAX_MINERS_PER_TASK
    return min(MAX_MINERS_PER_TASK, (max_value_at_risk - max_price) // stake_lock)


def assigned_miners(
    pipelines: list[PipelineRecord], live: list[str], room: int = MAX_MINERS_PER_TASK
) -> list[str] | None:
    """The miners to assign on-chain: the planned pipelines' miners, then live spares, at most `room` in all
    (the contract's limit, and the stake locks the task's value cap leaves room for); None when the planned
    miners alone do not fit. Only assigned miners can sign the results and be paid, so a re-plan after a miner
    fails can only draw on them; a spare that serves nothing is paid nothing and gets its stake lock back at
    settlement."""
    planned = {miner for p in pipelines for miner in p.miners}
    if len(planned) > room:
        return None
    spares = [address for address in live if address not in planned]
    return sorted(planned | set(spares[: room - len(planned)]))


def _usable_pipelines(session: Session, ctx: Context, batch: Batch, now: int) -> list[PipelineRecord]:
    """Live pipelines made only of the miners assigned on-chain (only they can be paid for this task) that the
    batch did not leave out (a revoked signer, a signature not given in time)."""
    served = ctx.settings.model(batch.model)
    if served is None:
        return []
    _, pipelines = _plan(session, ctx, served, now)
    left_out = set(batch.left_out_miners or [])
    return made_of(pipelines, [m for m in batch.miners or [] if m not in left_out])


def _plan(
    session: Session, ctx: Context, served: ServedModel, now: int
) -> tuple[list[Miner], list[PipelineRecord]]:
    """The live miners of the model the plan may use, and the plan over them (re-planned first if they
    changed, `ensure_plan`): all but the miners a batch still in progress left out."""
    assigned = active_assignments(session)
    live = [m for m in live_miners(session, ctx.live, served.name) if m.address not in assigned.left_out]
    return live, ensure_plan(session, served, live, now, assigned.committed)


@dataclass(frozen=True)
class Assignments:
    """`committed`: the miners assigned on-chain to a batch still in progress (the planner keeps them
    together). `left_out`: those of them such a batch left out (the planner leaves them out while it runs:
    they cannot sign for its lines, and planned in they could hold every pipeline its own miners can form)."""

    committed: frozenset[str]
    left_out: frozenset[str]


def active_assignments(session: Session) -> Assignments:
    """The assignments of the batches still in progress, in one read."""
    rows = session.execute(
        select(Batch.miners, Batch.left_out_miners).where(
            Batch.status.in_(ACTIVE_BATCH_STATUSES), Batch.miners.is_not(None)
        )
    )
    committed: set[str] = set()
    left_out: set[str] = set()
    for miners, left in rows:
        committed.update(miners or [])
        left_out.update(left or [])
    return Assignments(frozenset(committed), frozenset(left_out))


def _no_pipeline_reason(batch: Batch, live: list[Miner]) -> str:
    """Why the batch's work waits: which of its assigned miners are live."""
    assigned = batch.miners or []
    up = sorted(set(assigned) & {m.address for m in live})
    return (
        f"waiting for a live pipeline made of the task's assigned miners: {len(up)} of its {len(assigned)} "
        "are live and they cannot hold a replica of the model together (the escrow comes back if none forms "
        "by the task's deadline)"
    )


def made_of(pipelines: list[PipelineRecord], miners: list[str]) -> list[PipelineRecord]:
    """The pipelines whose every stage is one of `miners`."""
    allowed = set(miners)
    return [p for p in pipelines if allowed.issuperset(p.miners)]


def _run(session: Session, ctx: Context, batch: Batch, now: int) -> None:
    usable = _usable_pipelines(session, ctx, batch, now)
    dispatch.reroute(session, ctx.live, batch, usable, now)
    session.flush()
    if not usable:
        batch.status_detail = _no_pipeline_reason(batch, live_miners(session, ctx.live, batch.model))
    elif batch.status_detail and batch.status_detail.startswith("waiting for a live pipeline"):
        batch.status_detail = None
    if dispatch.result_count(batch) == batch.request_total:
        _set(batch, "finalizing", now)


def _stop(session: Session, batch: Batch, now: int) -> None:
    """Cancelling: drop the work not done; settle what was."""
    for unit in session.scalars(
        select(WorkUnit).where(WorkUnit.batch_id == batch.id, WorkUnit.status != "done")
    ):
        unit.status = "done"
    if dispatch.result_count(batch) == 0:
        _set(batch, "cancelled", now)  # nothing to pay for: the escrow comes back by cancel or expiry
        return
    _set(batch, "finalizing", now)


def _finalize(session: Session, ctx: Context, batch: Batch, task: Task, now: int) -> None:
    if batch.commitment is None:
        _write_outputs(session, ctx, batch, task, now)
        return  # miners sign from here on; the next step commits
    commitment = ResultCommitment.from_json(batch.task_id, batch.commitment)
    if task.status in COMMITTED_ON_CHAIN:
        _committed_elsewhere(batch, task, now)
        return
    miners = batch.miners or []
    stored = session.scalars(select(Signature).where(Signature.batch_id == batch.id))
    signatures = {s.miner: s for s in stored}
    missing = [m for i, m in enumerate(miners) if commitment.needs_signature(i) and m not in signatures]
    parties = None
    if any(m not in signatures for m in miners):  # a slot without a signature: what does the chain say of it
        parties = ctx.chain.parties(batch.task_id)
        slots = ctx.chain.slots(commitment, parties)
        missing = [m for m in missing if m.lower() not in slots.vouched]  # an on-chain vouch carries it
        cut = [m for m in missing if m.lower() in slots.revoked]
        if cut:
            _serve_without(
                session, ctx, batch, cut, now, "revoked the signer key they accepted the task with"
            )
            return
        left_out = [
            m for i, m in enumerate(miners) if not commitment.needs_signature(i) and m not in signatures
        ]
        stuck = [m for m in left_out if m.lower() in slots.vouched_other]
        if stuck:  # the contract refuses to leave them out: never send a commit that must revert
            batch.status_detail = (
                f"waiting: miner(s) {', '.join(stuck)} vouched on-chain for other results of task "
                f"{batch.task_id}; each must vouch for these, or revoke its signer again (which drops its"
                " vouch)"
            )
            return
    if missing:
        _await_signers(session, ctx, batch, missing, now)
        return
    if _drop_stale(session, ctx, commitment, signatures, parties or ctx.chain.parties(batch.task_id)):
        return  # the next step waits for their miners to sign this commitment
    if task.status == TaskStatus.ASSIGNED:
        # an empty signature stands for a miner paid nothing that vouches for nothing (the contract's rule)
        batch.commit_tx = ctx.chain.commit(
            commitment, [hex_bytes(signatures[m].signature) if m in signatures else b"" for m in miners]
        )
    _committed(batch, now)


def _committed(batch: Batch, now: int) -> None:
    """The batch's results are on-chain: it completed (or, cancelled midway, was cancelled)."""
    batch.status_detail = None
    _set(batch, "cancelled" if batch.cancelling_at else "completed", now)


# a task whose results are on-chain: its miners committed them (a commitment every one of them vouched for)
COMMITTED_ON_CHAIN = frozenset({TaskStatus.RESULTS_COMMITTED, TaskStatus.DISPUTED, TaskStatus.FINALIZED})


def _committed_elsewhere(batch: Batch, task: Task, now: int) -> None:
    """The task was committed on-chain while the batch waited for signatures (its miners commit when the
    coordinator does not): nothing is left to wait for, and nothing may be served again, since the batch's
    trees answer the owner's challenges. Completed when the chain holds the batch's results root; otherwise
    (results the coordinator no longer holds) the batch says so and waits for an operator."""
    if "0x" + task.results_root.hex() == (batch.results_root or "").lower():
        _committed(batch, now)
        return
    batch.status_detail = (
        f"task {batch.task_id} was committed on-chain with results root 0x{task.results_root.hex()}, not "
        "this batch's: the coordinator cannot answer challenges of those lines (an operator must look)"
    )


def _drop_stale(
    session: Session,
    ctx: Context,
    commitment: ResultCommitment,
    signatures: dict[str, Signature],
    parties: Parties,
) -> bool:
    """Deletes, right before the commit, every signature that is not its miner's over this commitment by the
    signer the task recorded for it (one that raced a change of the commitment, or whose signer was revoked
    since), to be given again; whether there was one. Checked once here rather than on every step while
    signatures come in."""
    stale = [
        s
        for s in signatures.values()
        if not ctx.chain.check_signature(s.miner, hex_bytes(s.signature), commitment, parties)
    ]
    for signature in stale:
        session.delete(signature)
    return bool(stale)


def _await_signers(session: Session, ctx: Context, batch: Batch, missing: list[str], now: int) -> None:
    """Waits for the miners that still have to sign; a miner silent for two heartbeat timeouts since the batch
    began finalizing is taken as gone for good, and the lines it served are served again by the others, so
    that the commitment no longer needs its signature. A live miner that has not signed `signature_wait_s`
    after that is left out the same way: a miner that never signs (colluding with an owner who reads the
    outputs meanwhile, or refusing) would otherwise hold the batch until its task expires unpaid."""
    gone = sorted(set(missing) - set(ctx.live.alive(missing)))
    waited = now - (batch.finalizing_at or now)
    if gone and waited >= 2 * ctx.settings.heartbeat_ttl_s:
        reserve_without(session, ctx, batch, gone, now)
        return
    if waited >= ctx.settings.signature_wait_s:
        why = f"did not sign the results within {ctx.settings.signature_wait_s} s"
        _serve_without(session, ctx, batch, missing, now, why)
        return
    silent = f" ({len(gone)} of them silent: their lines are served again if they do not come back)"
    waiting = f"waiting for {len(missing)} miner(s) to sign the results: {', '.join(missing)}"
    batch.status_detail = waiting + (silent if gone else "")


def _serve_without(
    session: Session, ctx: Context, batch: Batch, miners: list[str], now: int, why: str
) -> None:
    """Leaves `miners` out of the batch (`why`: they revoked the signer they accepted the task with, or did
    not sign in time): the lines they served are served again on a live pipeline without them, and the plan
    leaves them out while the batch runs (`_plan`). While no such pipeline exists, the batch waits
    for one (or for their accounts to vouch on-chain); serving the lines again on the same miners would only
    come back here."""
    batch.left_out_miners = sorted(set(batch.left_out_miners or []) | set(miners))
    usable = _usable_pipelines(session, ctx, batch, now)
    who = ", ".join(miners)
    if usable:
        reserve_without(session, ctx, batch, miners, now, f"miner(s) {who} served them but {why}")
        return
    batch.status_detail = (
        f"waiting: miner(s) {who} {why}; their lines are served again once a pipeline of task "
        f"{batch.task_id}'s other miners is live, or their accounts vouch on-chain"
    )


def reserve_without(
    session: Session, ctx: Context, batch: Batch, gone: list[str], now: int, reason: str | None = None
) -> int:
    """Serves again the lines whose pipeline includes a miner of `gone`, on pipelines without them; returns
    how many. Those miners are then paid nothing and vouch for nothing. `reason` is what the batch's status
    says (by default: they are gone and cannot sign)."""
    lines = [
        r.line_index
        for r in session.scalars(select(Result).where(Result.batch_id == batch.id, Result.ok))
        if set(r.pipeline) & set(gone)
    ]
    why = reason or f"miner(s) {', '.join(gone)} served them but are gone and cannot sign"
    return serve_again(session, ctx, batch, lines, set(gone), why, now)


def serve_again(
    session: Session, ctx: Context, batch: Batch, lines: list[int], avoid: set[str], reason: str, now: int
) -> int:
    """Sends the batch back to in_progress with the results of `lines` dropped and those lines queued again
    on the live pipelines (those without a miner of `avoid` when there are any), and the written outputs,
    commitment and signatures discarded; returns how many lines are served again."""
    dropped = list(
        session.scalars(select(Result).where(Result.batch_id == batch.id, Result.line_index.in_(lines)))
    )
    for result in dropped:
        session.delete(result)
    batch.completed_count = Batch.completed_count - sum(r.ok for r in dropped)
    batch.failed_count = Batch.failed_count - sum(not r.ok for r in dropped)
    for file_id in (batch.output_file_id, batch.error_file_id):
        file = session.get(File, file_id) if file_id else None
        if file is not None:
            session.delete(file)
    for signature in session.scalars(select(Signature).where(Signature.batch_id == batch.id)):
        session.delete(signature)
    batch.output_file_id = batch.error_file_id = batch.results_root = None
    batch.commitment = None
    session.flush()
    usable = _usable_pipelines(session, ctx, batch, now)
    preferred = [p for p in usable if not set(p.miners) & avoid] or usable
    # with no live pipeline yet, the units wait on the batch's last one, and reroute moves them once one is
    # planned (a unit queued on a pipeline that is not usable is rerouted)
    last = session.scalar(select(WorkUnit.pipeline_id).where(WorkUnit.batch_id == batch.id).limit(1))
    targets = preferred or [p for p in [session.get(PipelineRecord, last)] if p is not None]
    indices = sorted(r.line_index for r in dropped)
    if indices:
        dispatch.create_units(session, ctx.live, batch, targets, ctx.settings.work_unit_size, now, indices)
    batch.status_detail = f"serving {len(indices)} line(s) again: {reason}"
    _set(batch, "in_progress", now)
    return len(indices)


def result_trees(session: Session, batch: Batch) -> tuple[list[Result | None], ResultTrees]:
    """Each request's result (None for a line that never ran) and the trees over their leaves: one leaf per
    request of the input file, in request order, an unserved leaf where there is no result."""
    by_index = {r.line_index: r for r in session.scalars(select(Result).where(Result.batch_id == batch.id))}
    rows = session.execute(
        select(Request.line_index, Request.custom_id, Request.line_hash)
        .where(Request.file_id == batch.input_file_id)
        .order_by(Request.line_index)
    )
    results: list[Result | None] = []
    leaves = []
    for index, custom_id, line_hash in rows:
        r = by_index.get(index)
        results.append(r)
        if r is None:
            leaves.append(
                ResultLeaf.unserved(batch.task_id, index, custom_id_hash(custom_id), hex_bytes(line_hash))
            )
            continue
        leaves.append(
            ResultLeaf(
                task_id=batch.task_id,
                request_index=index,
                custom_id_hash=custom_id_hash(r.custom_id),
                input_hash=hex_bytes(line_hash),
                output_hash=hex_bytes(r.output_hash),
                input_tokens=r.input_tokens,
                output_tokens=r.output_tokens,
                pipeline=tuple(r.pipeline),
            )
        )
    return results, ResultTrees(leaves, batch.miners or [])


def miner_weights(results: Sequence[Result | None], miners: Sequence[str]) -> list[int]:
    """Each assigned miner's work, which the miners' part of the payment is split by: the tokens of every line
    it served times the layers it ran for it. As every line runs through all the model's layers, they add up
    to the task's tokens times the model's layers, which each miner checks before signing."""
    weights = dict.fromkeys(miners, 0)
    for result in results:
        if result is None:
            continue
        for miner, layers in zip(result.pipeline, result.stage_layers or [], strict=True):
            weights[miner] += (result.input_tokens + result.output_tokens) * layers
    return [weights[m] for m in miners]


def proven_line(result: Result, trees: ResultTrees, index: int) -> dict[str, Any]:
    """The output (or error) line as the files carry it: with its leaf's fields, its positional proof in the
    results tree and, for each miner of its pipeline, its proof in that miner's served tree."""
    line: dict[str, Any] = json.loads(result.body)
    line[PROOF_KEY] = LineProof.of(trees, index).to_json()
    return line


def _write_outputs(session: Session, ctx: Context, batch: Batch, task: Task, now: int) -> None:
    """Output and error files (each line with its Merkle proofs), the results root, the priced commitment."""
    results, trees = result_trees(session, batch)
    files: dict[bool, list[bytes]] = {True: [], False: []}
    for i, result in enumerate(results):
        if result is None:
            continue
        line = proven_line(result, trees, i)
        files[result.ok].append(json.dumps(line, separators=(",", ":")).encode() + b"\n")
    for ok, lines in files.items():
        if not lines:
            continue
        data = b"".join(lines)
        record = File(
            id=new_id("file-"),
            owner=batch.owner,
            purpose="batch_output" if ok else "batch_error",
            filename=f"{batch.id}_{'output' if ok else 'error'}.jsonl",
            bytes=len(data),
            created_at=now,
            line_count=len(lines),
        )
        session.add(record)
        session.add(FileContent(file_id=record.id, data=data))
        if ok:
            batch.output_file_id = record.id
        else:
            batch.error_file_id = record.id
    input_tokens, output_tokens = trees.usage.input_tokens, trees.usage.output_tokens
    pay = ctx.chain.market.tasks.prices_of(batch.task_id).cost(input_tokens, output_tokens, task.max_price)
    fee_bps = ctx.chain.terms(batch.task_id).coordinator_fee_bps
    amounts = settlement.split(pay - settlement.fee(pay, fee_bps), miner_weights(results, batch.miners or []))
    commitment = ResultCommitment(
        batch.task_id,
        trees.root,
        input_tokens,
        output_tokens,
        pay,
        tuple(amounts),
        trees.served_roots(),
        tuple(batch.miners or []),
        len(results),
    )
    batch.results_root = "0x" + trees.root.hex()
    batch.commitment = commitment.to_json()
