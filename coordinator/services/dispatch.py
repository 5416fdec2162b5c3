"""Work units: a batch cut into slices, each given to the pipeline that Phase 2 prices cheapest
(services/routing.py); heads claim units, report their lines' progress, return results, and a unit whose head
goes silent is given to another pipeline, which resumes each unfinished line from the output tokens last
reported for it. A request's result is stored once, whatever retries and duplicate submissions happen (the
results table's primary key is (batch, line))."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, NamedTuple, cast

from sqlalchemy import CursorResult, Select, select, update
from sqlalchemy.orm import Session

from client_sdk import openai_batch
from client_sdk.inputs import canonical_json
from client_sdk.openai_batch import error_line, output_line, response_body
from client_sdk.protocol.sampling import line_seed
from client_sdk.results import output_hash, output_line_id
from coordinator.db.models import (
    Batch,
    FileContent,
    Miner,
    PipelineRecord,
    PipelineStage,
    Request,
    Result,
    WorkUnit,
)
from coordinator.scheduling.plan import Stage
from coordinator.services.errors import Conflict, InvalidInput, NotFound
from coordinator.services.live import LiveMembership
from coordinator.services.planning import cluster_of
from coordinator.services.recent import Recent
from coordinator.services.routing import MeasuredLinks, Router, measured_through_relays

MAX_ATTEMPTS = 3
FINISH_REASONS = ("stop", "length")


@dataclass(frozen=True)
class LineResult:
    """What a pipeline head reports for one line."""

    index: int
    text: str
    output_token_ids: tuple[int, ...]
    prompt_tokens: int
    finish_reason: str


def create_units(
    session: Session,
    live: LiveMembership,
    batch: Batch,
    pipelines: list[PipelineRecord],
    unit_size: int,
    now: int,
    indices: list[int] | None = None,
) -> int:
    """Cuts the batch's requests (or only those at `indices`) into units of `unit_size`, each given to the
    pipeline Phase 2 prices cheapest with the units before it counted as load; returns how many."""
    lines = list(range(batch.request_total)) if indices is None else indices
    units = [lines[i : i + unit_size] for i in range(0, len(lines), unit_size)]
    router = pipeline_router(session, live, pipelines)
    for unit in units:
        target = router.cheapest()
        if target is None:  # every pipeline just lost a miner: reroute moves the unit after the re-plan
            target = pipelines[0].id
        router.move(len(unit), to=target)
        session.add(
            WorkUnit(
                batch_id=batch.id,
                line_indices=unit,
                pipeline_id=target,
                status="queued",
                attempts=0,
                created_at=now,
            )
        )
    return len(units)


def pipeline_router(session: Session, live: LiveMembership, pipelines: list[PipelineRecord]) -> Router:
    """Phase 2's view of the pipelines: each miner's per-layer latency from its latest heartbeat (its joined
    profile once it has gone silent, which also rules its pipeline out), the regions' round trips or the one
    it measured to a peer, its reported queue depth, and the lines already waiting on each pipeline."""
    addresses = sorted({miner for p in pipelines for miner in p.miners})
    miners = list(session.scalars(select(Miner).where(Miner.address.in_(addresses))))
    beats = live.alive(addresses)
    regions = cluster_of(miners)
    return Router(
        {p.id: [Stage(s["miner"], s["start"], s["end"]) for s in p.stages] for p in pipelines},
        MeasuredLinks(regions.gpus, regions.rtt_ms, measured_through_relays(beats)),
        step_ms={
            m.address: beats[m.address].layer_latency_ms if m.address in beats else m.layer_latency_ms
            for m in miners
        },
        queued_lines=_queued_lines(session, [p.id for p in pipelines]),
        queue_depth={a: beat.queue_depth for a, beat in beats.items()},
        dead=set(addresses) - set(beats),
    )


def _queued_lines(session: Session, pipeline_ids: list[int]) -> Counter[int]:
    """Lines of the units, of any batch, queued or leased on each pipeline."""
    rows = session.execute(
        select(WorkUnit.pipeline_id, WorkUnit.line_indices).where(
            WorkUnit.pipeline_id.in_(pipeline_ids), WorkUnit.status != "done"
        )
    )
    lines: Counter[int] = Counter()
    for pipeline_id, indices in rows:
        lines[pipeline_id] += len(indices)
    return lines


def claim(session: Session, miner: str, now: int, lease_s: int) -> dict[str, Any] | None:
    """The next queued unit of a pipeline this miner heads, leased to it; None when there is none."""
    heads = headed_by(session, miner, active_only=True)
    if not heads:
        return None
    query = (
        select(WorkUnit)
        .where(WorkUnit.pipeline_id.in_(heads), WorkUnit.status == "queued")
        .order_by(WorkUnit.id)
        .limit(1)
        .with_for_update(skip_locked=True)
    )
    unit = session.scalars(query).first()
    if unit is None:
        return None
    unit.status, unit.leased_until, unit.attempts = "leased", now + lease_s, unit.attempts + 1
    unit.leased_at = now
    batch = session.get(Batch, unit.batch_id)
    assert batch is not None
    rows = input_rows(session, batch.input_file_id)
    partials = unit.partial_outputs or {}
    return {
        "unit_id": unit.id,
        "batch_id": batch.id,
        "task_id": batch.task_id,
        "model": batch.model,
        "created": batch.in_progress_at,
        "lease_s": lease_s,
        # "resume": the output tokens a head that lost the unit had generated ([] for none): taken on its
        # word, as every miner of the finishing pipeline checks the whole line before signing it, and a wrong
        # line can be disputed
        "lines": [
            {"index": i, "line": rows[i], "resume": partials.get(str(i), [])} for i in unit.line_indices
        ],
    }


def headed_by(session: Session, miner: str, *, active_only: bool) -> list[int]:
    """Ids of the pipelines whose first stage is this miner."""
    return pipelines_of(session, miner, active_only=active_only, heads_only=True)


def pipelines_of(session: Session, miner: str, *, active_only: bool, heads_only: bool = False) -> list[int]:
    """Ids of the pipelines this miner is a stage of (its first stage, with `heads_only`), in plan order."""
    query = pipelines_query(miner, active_only=active_only, heads_only=heads_only)
    return list(session.scalars(query.order_by(PipelineStage.pipeline_id)))


def pipelines_query(miner: str, *, active_only: bool, heads_only: bool = False) -> Select[int]:
    """`pipelines_of` as a query, for `IN (...)` in SQL: an indexed read of the miner's own stages, and no
    parameter per plan it was ever part of."""
    query = select(PipelineStage.pipeline_id).where(PipelineStage.miner == miner)
    if heads_only:
        query = query.where(PipelineStage.position == 0)
    if active_only:
        query = query.join(PipelineRecord, PipelineRecord.id == PipelineStage.pipeline_id).where(
            PipelineRecord.active
        )
    return query


def renew_leases(session: Session, miner: str, unit_ids: list[int], now: int, lease_s: int) -> list[int]:
    """A live head keeps the units it says it is serving: its heartbeat pushes their leases forward, so a
    lease runs out only when the head goes silent or forgets the unit (a claim whose answer it never got), or
    when a miner of the unit's pipeline restarted after the lease began: the head cannot tell that the work
    died with that stage, but the coordinator can. Returns the units named that are no longer the head's to
    serve (done, taken back, or leased to another), which the head gives up at once."""
    if not unit_ids:
        return []
    # a re-plan does not take a unit from its head
    heads = pipelines_query(miner, active_only=False, heads_only=True)
    units = session.scalars(
        select(WorkUnit).where(
            WorkUnit.id.in_(unit_ids), WorkUnit.pipeline_id.in_(heads), WorkUnit.status == "leased"
        )
    )
    kept = set()
    for unit in units:
        if not _restarted_since(session, unit.pipeline_id, unit.leased_at or 0):
            unit.leased_until = now + lease_s
            kept.add(unit.id)
    return sorted(set(unit_ids) - kept)


def give_back(session: Session, miner: str, unit_ids: list[int], now: int) -> list[str]:
    """Ends now the leases of the named units leased to pipelines this miner heads (it gave them up: a new
    plan, a stage gone), so the next sweep gives them to a pipeline at once, with their lines' progress,
    instead of after the lease. Returns the batches of the units given back."""
    heads = pipelines_query(miner, active_only=False, heads_only=True)
    units = session.scalars(
        select(WorkUnit).where(
            WorkUnit.id.in_(unit_ids), WorkUnit.pipeline_id.in_(heads), WorkUnit.status == "leased"
        )
    ).all()
    for unit in units:
        unit.leased_until = now
    return sorted({unit.batch_id for unit in units})


def break_leases_of(session: Session, miner: str, now: int) -> int:
    """Ends now the leases of units held by pipelines `miner` is a stage of: it has just (re)started, so their
    in-flight work is gone; the sweep gives them to another pipeline. Returns how many were leased."""
    pipelines = pipelines_query(miner, active_only=False)
    result = cast(
        CursorResult[Any],  # what an UPDATE returns: it counts the rows matched
        session.execute(
            update(WorkUnit)
            .where(WorkUnit.pipeline_id.in_(pipelines), WorkUnit.status == "leased")
            .values(leased_until=now)
        ),
    )
    return int(result.rowcount or 0)


def _restarted_since(session: Session, pipeline_id: int, since: int) -> bool:
    """Whether a stage's miner of the pipeline (re)joined after `since` (a spare's restart loses no work)."""
    pipeline = session.get(PipelineRecord, pipeline_id)
    if pipeline is None:
        return True
    started = session.scalars(select(Miner.session_started_at).where(Miner.address.in_(pipeline.miners)))
    return any(s is not None and s > since for s in started)


def record_progress(session: Session, miner: str, unit_id: int, partials: dict[int, tuple[int, ...]]) -> int:
    """Keeps the output tokens so far of some lines of a unit leased to a pipeline this miner heads (each
    replaces what was kept for its line, the other lines' stay); returns how many lines were recorded."""
    unit, _pipeline, batch = _headed_unit(session, miner, unit_id)
    if unit.status == "done":
        return 0  # its results went in meanwhile: nothing left to resume
    requests = _requests(session, batch, unit.line_indices)
    for index, tokens in partials.items():
        if index not in requests:
            raise InvalidInput(f"line {index} is not part of work unit {unit_id}", "lines")
        if not 1 <= len(tokens) < requests[index].max_tokens:  # an output of max_tokens is finished
            raise InvalidInput(
                f"line {index}: 1 to {requests[index].max_tokens - 1} output tokens so far expected", "lines"
            )
    kept = dict(unit.partial_outputs or {})
    kept.update((str(index), list(tokens)) for index, tokens in partials.items())
    unit.partial_outputs = kept  # a new value: the ORM does not see changes inside a JSON value
    return len(partials)


def _file_rows(session: Session, file_id: str) -> tuple[str, ...]:
    content = session.get(FileContent, file_id)
    if content is None:
        raise NotFound("file", file_id)
    # validated at upload: UTF-8, one request per line, an optional final newline
    return tuple(content.data.decode().rstrip("\n").split("\n"))


# a file's content never changes once uploaded, and every claim and every result of a batch needs its lines:
# they are read and split once per process instead of once per request (a 50,000-line file is megabytes)
_recent_files: Recent[str, tuple[str, ...]] = Recent(size=4)


def input_rows(session: Session, file_id: str) -> tuple[str, ...]:
    """The lines of an uploaded file."""
    return _recent_files.get(file_id, lambda: _file_rows(session, file_id))


def _headed_unit(session: Session, miner: str, unit_id: int) -> tuple[WorkUnit, PipelineRecord, Batch]:
    """A unit of a pipeline this miner heads, claimed (leased, or done already), of a batch still running;
    with its pipeline and batch."""
    unit = session.get(WorkUnit, unit_id)
    if unit is None:
        raise NotFound("work unit", str(unit_id))
    pipeline = session.get(PipelineRecord, unit.pipeline_id)
    assert pipeline is not None
    if pipeline.head != miner:
        raise NotFound("work unit", str(unit_id))
    if unit.status == "queued":
        raise Conflict(f"work unit {unit_id} is not leased to you any more", "lease_lost")
    # locked first, before any unit row: results go in only while the batch runs (not after the worker
    # moved it on), and the worker, which locks the batch before its units, cannot deadlock with us
    batch = session.get(Batch, unit.batch_id, with_for_update=True)
    assert batch is not None
    if batch.status != "in_progress":
        raise Conflict(
            f"batch {batch.id} is {batch.status}; its work is no longer taken", "batch_not_running"
        )
    return unit, pipeline, batch


def _requests(session: Session, batch: Batch, indices: list[int]) -> dict[int, Request]:
    """The batch's requests at these line indices, by index."""
    query = select(Request).where(Request.file_id == batch.input_file_id, Request.line_index.in_(indices))
    return {r.line_index: r for r in session.scalars(query)}


class Submitted(NamedTuple):
    batch_id: str
    stored: int  # results that were new


def submit(session: Session, miner: str, unit_id: int, results: list[LineResult], now: int) -> Submitted:
    """Stores the results of a unit leased to a pipeline this miner heads."""
    unit, pipeline, batch = _headed_unit(session, miner, unit_id)
    allowed = set(unit.line_indices)
    requests = _requests(session, batch, unit.line_indices)
    rows = input_rows(session, batch.input_file_id)
    seen = set(
        session.scalars(
            select(Result.line_index).where(Result.batch_id == batch.id, Result.line_index.in_(allowed))
        )
    )
    stored = 0
    for result in results:
        if result.index not in allowed:
            raise InvalidInput(f"line {result.index} is not part of work unit {unit_id}", "results")
        request = requests[result.index]
        if result.prompt_tokens != request.prompt_tokens:
            raise InvalidInput(
                f"line {result.index}: the prompt has {request.prompt_tokens} tokens, "
                f"not {result.prompt_tokens}",
                "results",
            )
        if result.finish_reason not in FINISH_REASONS:
            raise InvalidInput(f"line {result.index}: finish_reason must be stop or length", "results")
        if not 1 <= len(result.output_token_ids) <= request.max_tokens:
            raise InvalidInput(
                f"line {result.index}: 1 to {request.max_tokens} output tokens expected", "results"
            )
        if result.index in seen:
            continue  # a retry delivered it already: exactly once
        line = openai_batch.parse_line(rows[result.index], result.index + 1)
        body = response_body(
            line,
            request_id=output_line_id(batch.task_id, result.index),
            created=batch.in_progress_at or now,
            text=result.text,
            prompt_tokens=result.prompt_tokens,
            completion_tokens=len(result.output_token_ids),
            finish_reason=result.finish_reason,
            token_ids=result.output_token_ids,  # what a verifier re-scores (text does not round-trip)
            seed=line_seed(batch.task_id, request.custom_id, line.seed),
        )
        out = output_line(output_line_id(batch.task_id, result.index), request.custom_id, body["id"], body)
        # the line's pipeline is the one that finished it, even when it resumed from tokens another pipeline
        # generated: its miners checked the whole line before signing, and they are the ones a dispute names
        session.add(
            _result_row(
                batch,
                result.index,
                request.custom_id,
                out,
                True,
                result.prompt_tokens,
                len(result.output_token_ids),
                pipeline.miners,
                now,
                [s["end"] - s["start"] for s in pipeline.stages],
            )
        )
        seen.add(result.index)
        stored += 1
    if allowed <= seen:
        _close(unit)
    _count_results(batch, completed=stored, failed=0)
    return Submitted(batch.id, stored)


def _result_row(
    batch: Batch,
    index: int,
    custom_id: str,
    line: dict[str, Any],
    ok: bool,
    input_tokens: int,
    output_tokens: int,
    pipeline: list[str],
    now: int,
    stage_layers: list[int] | None = None,
) -> Result:
    return Result(
        batch_id=batch.id,
        line_index=index,
        custom_id=custom_id,
        ok=ok,
        body=canonical_json(line).decode(),
        output_hash="0x" + output_hash(line).hex(),
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        pipeline=pipeline,
        stage_layers=stage_layers,
        created_at=now,
    )


def reroute(
    session: Session, live: LiveMembership, batch: Batch, pipelines: list[PipelineRecord], now: int
) -> int:
    """Gives units whose lease ran out, or whose pipeline is gone, to the live pipeline Phase 2 prices
    cheapest; a unit that failed MAX_ATTEMPTS times gets error lines instead. Returns how many units moved."""
    usable = {p.id for p in pipelines}
    units = session.scalars(
        select(WorkUnit).where(WorkUnit.batch_id == batch.id, WorkUnit.status != "done")
    ).all()
    stranded = [u for u in units if _stranded(u, usable, now)]
    if not stranded:
        return 0  # the usual tick: no heartbeats or loads to read
    router = pipeline_router(session, live, pipelines) if pipelines else None
    moved = 0
    for unit in stranded:
        if unit.attempts >= MAX_ATTEMPTS:
            fail_unit(session, batch, unit, "the request failed on every pipeline it was sent to", now)
            continue
        # priced while the unit still weighs on its own pipeline, which tips a close call away from the
        # pipeline that just lost it
        target = router.cheapest() if router else None
        if router is None or target is None:
            continue  # no live pipeline: the unit waits for one
        router.move(len(unit.line_indices), to=target, source=unit.pipeline_id)
        unit.pipeline_id, unit.status, unit.leased_until = target, "queued", None
        moved += 1
    return moved


def _stranded(unit: WorkUnit, usable: set[int], now: int) -> bool:
    """Its lease ran out (the head went silent or forgot it), or it waits on a pipeline no longer usable."""
    expired = unit.status == "leased" and (unit.leased_until or 0) < now
    orphaned = unit.status == "queued" and unit.pipeline_id not in usable
    return expired or orphaned


def fail_unit(session: Session, batch: Batch, unit: WorkUnit, message: str, now: int) -> None:
    """Error lines for every line of the unit still without a result."""
    done = set(
        session.scalars(
            select(Result.line_index).where(
                Result.batch_id == batch.id, Result.line_index.in_(unit.line_indices)
            )
        )
    )
    failed = 0
    for request in _requests(session, batch, unit.line_indices).values():
        if request.line_index in done:
            continue
        line = error_line(
            output_line_id(batch.task_id, request.line_index), request.custom_id, "server_error", message
        )
        session.add(_result_row(batch, request.line_index, request.custom_id, line, False, 0, 0, [], now))
        failed += 1
    _count_results(batch, completed=0, failed=failed)
    _close(unit)


def _count_results(batch: Batch, completed: int, failed: int) -> None:
    """Adds newly stored results to the batch's counts, in SQL (`count = count + n`), so that no concurrent
    writer's increment is lost; the caller holds the batch row locked."""
    if completed:
        batch.completed_count = Batch.completed_count + completed
    if failed:
        batch.failed_count = Batch.failed_count + failed


def _close(unit: WorkUnit) -> None:
    """Every line has its result: the unit is done, and its partial outputs are of no more use."""
    unit.status, unit.partial_outputs = "done", None


def result_count(batch: Batch) -> int:
    """Results stored so far, completed or failed."""
    return batch.completed_count + batch.failed_count
