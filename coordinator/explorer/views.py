"""The explorer's pages as view models: what the coordinator's rows and the chain's records read, turned into
figures with their sources. Pure: the callers (coordinator.explorer.reads) do every read and pass it in.

Each page keeps every figure it shows in `figures`, by a key the page's script polls (the page's JSON twin
sends the same keys), so a page is drawn and refreshed from one view model."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from client_sdk.chain.types import (
    Audit,
    Dispute,
    DisputeStatus,
    Juror,
    Resolution,
    Round,
    Stake,
    Verifier,
    Vote,
    current_phase,
)
from client_sdk.protocol.constants import ACTIVE_BATCH_STATUSES, FINAL_BATCH_STATUSES
from client_sdk.protocol.task import Task, TaskPrices, TaskStatus
from coordinator.db.models import Batch, Miner, PipelineRecord
from coordinator.explorer.figures import (
    Figure,
    Source,
    address,
    amount,
    api,
    call,
    count,
    digest,
    hex0x,
    moment,
    short,
)
from coordinator.services.live import Heartbeat

THROUGHPUT_MINUTES = 30  # the throughput chart's span, one bar a minute
BATCH_STATUSES = ACTIVE_BATCH_STATUSES + FINAL_BATCH_STATUSES
EXPLORER_DATA = "/explorer/api"  # the JSON twins' prefix


@dataclass
class Page:
    """What every page has: its title, the JSON twin its script polls (`data`), its figures by key and its
    bar series (heights in percent of the chart) by name."""

    title: str
    data: str
    figures: dict[str, Figure] = field(default_factory=dict)
    series: dict[str, list[float]] = field(default_factory=dict)

    def live(self) -> dict[str, Any]:
        """The JSON twin: every figure's text (and title) by key, and the bar series."""
        return {
            "figures": {key: {"text": f.text, "title": f.title} for key, f in self.figures.items()},
            "series": self.series,
        }


def model_names(served: Sequence[tuple[str, bytes]]) -> dict[bytes, str]:
    return {model_hash: name for name, model_hash in served}


def model_label(model_id: bytes, names: Mapping[bytes, str]) -> str:
    """A model id as its served name when this coordinator serves it, else its shortened hash."""
    return names.get(bytes(model_id)) or short(hex0x(model_id), 10)


# -- the market


@dataclass(frozen=True)
class StageBox:
    """One stage of a drawn pipeline: its miner, its layers [start, end) and where it sits (percent of the
    model's layers)."""

    miner: str
    start: int
    end: int
    x: float
    width: float
    colour: int


@dataclass(frozen=True)
class PipelineRow:
    id: int
    model: str
    version: int
    microbatches: int
    layers: int
    stages: list[StageBox]


@dataclass(frozen=True)
class MinerInputs:
    """What the market page reads about the miners: their rows (joined here), the live ones' latest beats,
    their stakes on-chain (absent without a chain) and the active plan."""

    miners: Sequence[Miner]
    beats: Mapping[str, Heartbeat]
    stakes: Mapping[str, Stake]
    pipelines: Sequence[PipelineRecord]


@dataclass
class MarketPage(Page):
    models: list[tuple[str, str]] = field(default_factory=list)  # (name, model hash)
    regions: list[tuple[str, list[str]]] = field(default_factory=list)  # (region, miner addresses)
    more_miners: bool = False
    pipelines: list[PipelineRow] = field(default_factory=list)
    peak: int = 0  # output tokens per minute at the chart's top
    recent_tasks: list[int] = field(default_factory=list)
    chain: bool = False
    statuses: tuple[str, ...] = BATCH_STATUSES


def miner_state(live: bool, serving: bool, miner: Miner) -> str:
    """serving (a stage of an active pipeline), joined (live, in no pipeline) or offline (no heartbeat), and
    how its peers reach it."""
    state = "offline" if not live else "serving" if serving else "joined"
    if miner.relay_endpoint is not None:
        return f"{state}, behind a relay"
    return state if miner.reachable else f"{state}, unreachable"


def layers_held(pipelines: Sequence[PipelineRecord]) -> dict[str, int]:
    """The layers each miner runs in the active plan (over all its stages)."""
    held: dict[str, int] = {}
    for pipeline in pipelines:
        for stage in pipeline.stages:
            miner = str(stage["miner"])
            held[miner] = held.get(miner, 0) + int(stage["end"]) - int(stage["start"])
    return held


def pipeline_rows(pipelines: Sequence[PipelineRecord], colours: Mapping[str, int]) -> list[PipelineRow]:
    """The active plan drawn as rows of layer ranges, each stage placed over its model's layers."""
    rows = []
    for pipeline in pipelines:
        layers = max((int(s["end"]) for s in pipeline.stages), default=0) or 1
        boxes = [
            StageBox(
                miner=str(s["miner"]),
                start=int(s["start"]),
                end=int(s["end"]),
                x=100 * int(s["start"]) / layers,
                width=100 * (int(s["end"]) - int(s["start"])) / layers,
                colour=colours.get(str(s["miner"]), 0) % 8,
            )
            for s in pipeline.stages
        ]
        microbatches = pipeline.microbatches or len(pipeline.stages)
        rows.append(PipelineRow(pipeline.id, pipeline.model, pipeline.version, microbatches, layers, boxes))
    return rows


def throughput(per_minute: Mapping[int, int], now: int, minutes: int = THROUGHPUT_MINUTES) -> list[int]:
    """Output tokens served in each of the last `minutes` minutes, oldest first (the current minute last),
    from the tokens by minute (unix time // 60)."""
    current = now // 60
    return [per_minute.get(minute, 0) for minute in range(current - minutes + 1, current + 1)]


def bar_heights(values: Sequence[int]) -> tuple[list[float], int]:
    """Each value as a percent of the largest (the chart's top, also returned)."""
    peak = max(values, default=0)
    return [round(100 * v / peak, 1) if peak else 0.0 for v in values], peak


@dataclass(frozen=True)
class ChainCounts:
    """The market's on-chain totals, and the newest tasks' statuses by id."""

    tasks: int
    disputes: int
    audit_pool: int
    chain_time: int
    block: int
    symbol: str
    recent_tasks: Mapping[int, TaskStatus]


def market_page(
    served: Sequence[tuple[str, bytes]],
    inputs: MinerInputs,
    more_miners: bool,
    per_minute: Mapping[int, int],
    batch_counts: Mapping[str, int],
    chain: ChainCounts | None,
    now: int,
) -> MarketPage:
    """The market: served models, miners by region with their stake and state, the active plan, output
    throughput by minute, the last day's batches by status and the chain's totals."""
    page = MarketPage("Market", f"{EXPLORER_DATA}/market", more_miners=more_miners, chain=chain is not None)
    figures = page.figures
    page.models = [(name, hex0x(model_hash)) for name, model_hash in served]
    symbol = chain.symbol if chain else ""
    serving = {m for p in inputs.pipelines for m in p.miners}
    held = layers_held(inputs.pipelines)
    colours = {m.address: i for i, m in enumerate(inputs.miners)}
    regions: dict[str, list[str]] = {}
    miners_api = api("/v1/miners/join", "(the miner's own report, as it joined)")
    for miner in sorted(inputs.miners, key=lambda m: (m.region, m.joined_at, m.address)):
        key, beat = f"miner.{miner.address}", inputs.beats.get(miner.address)
        regions.setdefault(miner.region, []).append(miner.address)
        figures[f"{key}.address"] = address(miner.address, call("GPURegistry", "profileOf", miner.address))
        figures[f"{key}.gpu"] = Figure(f"{miner.gpu}, {miner.memory_gb:g} GB", miners_api)
        figures[f"{key}.endpoint"] = Figure(miner.endpoint, call("GPURegistry", "profileOf", miner.address))
        state = miner_state(beat is not None, miner.address in serving, miner)
        figures[f"{key}.state"] = Figure(state, api("/v1/miners/heartbeat", "(live while it beats)"))
        stake = inputs.stakes.get(miner.address)
        stake_source = call("GPURegistry", "stakeOf", miner.address)
        figures[f"{key}.stake"] = Figure(amount(stake.total, symbol) if stake else "—", stake_source)
        figures[f"{key}.free"] = Figure(amount(stake.free, symbol) if stake else "—", stake_source)
        latency = beat.layer_latency_ms if beat else miner.layer_latency_ms
        beat_source = api("/v1/miners/heartbeat", "layer_latency_ms")
        figures[f"{key}.latency"] = Figure(f"{latency:.2f} ms", beat_source)
        layers = held.get(miner.address, 0)
        step = f"{latency * layers:.1f} ms ({layers} layers)" if layers else "—"
        figures[f"{key}.step"] = Figure(step, beat_source)
    page.regions = sorted(regions.items())
    figures["miners.joined"] = count(len(inputs.miners), Source("coordinator: miners joined here"))
    figures["miners.live"] = count(len(inputs.beats), api("/metrics", "batchmarket_miners{state=live}"))
    figures["miners.serving"] = count(len(serving), api("/v1/miners/assignment", "(each miner's stage)"))
    page.pipelines = pipeline_rows(inputs.pipelines, colours)
    for row in page.pipelines:
        for box in row.stages:
            label = f"{short(box.miner)} L{box.start}-{box.end - 1}"
            figures[f"pipeline.{row.id}.{box.miner}"] = Figure(
                label, api("/v1/miners/assignment", "start, end"), title=box.miner
            )
    served_tokens = throughput(per_minute, now)
    page.series["throughput"], page.peak = bar_heights(served_tokens)
    tokens_source = Source("coordinator: output tokens of the results stored each minute", page.data)
    figures["throughput.minute"] = count(served_tokens[-1], tokens_source)
    figures["throughput.span"] = count(sum(served_tokens), tokens_source)
    figures["throughput.peak"] = count(page.peak, tokens_source)
    for status in BATCH_STATUSES:
        figures[f"batches.{status}"] = count(
            batch_counts.get(status, 0), api("/metrics", "batchmarket_batches")
        )
    if chain is not None:
        figures["chain.tasks"] = count(chain.tasks, call("TaskRegistry", "taskCount"))
        figures["chain.disputes"] = count(chain.disputes, call("Arbitration", "disputeCount"))
        figures["chain.audit_pool"] = Figure(
            amount(chain.audit_pool, symbol), call("PaymentEscrow", "auditPool")
        )
        figures["chain.block"] = count(chain.block, Source("eth_getBlockByNumber(latest)"))
        figures["chain.time"] = moment(
            chain.chain_time, now, Source("eth_getBlockByNumber(latest).timestamp")
        )
        page.recent_tasks = list(chain.recent_tasks)
        for task_id, task_status in chain.recent_tasks.items():
            figures[f"task.{task_id}.status"] = Figure(
                task_status.name.lower(),
                call("TaskRegistry", "getTask", task_id),
                href=f"/explorer/tasks/{task_id}",
            )
    return page


# -- a batch


@dataclass(frozen=True)
class BatchInputs:
    """What the batch page reads: the row, its usage so far, its work units by status, the acceptances and
    signatures its miners sent."""

    batch: Batch
    tokens: tuple[int, int]
    units: Mapping[str, int]
    accepted: int
    signed: int


def batch_stage(inputs: BatchInputs) -> str:
    """Where the batch is in its life, in a few words (why it waits is `status_detail`)."""
    batch, units = inputs.batch, inputs.units
    if batch.status == "validating":
        if batch.proposal is None:
            return "validating: the task is checked on-chain and pipelines are planned"
        return (
            f"validating: {inputs.accepted} of {len(batch.proposal['miners'])} miners accepted the stake lock"
        )
    if batch.status == "in_progress":
        total = sum(units.values())
        return (
            f"in progress: {units.get('done', 0)} of {total} work units done, "
            f"{units.get('leased', 0)} being served"
        )
    if batch.status == "finalizing":
        if batch.commit_tx is None:
            return f"finalizing: {inputs.signed} of {len(batch.miners or [])} miners signed the results"
        return "finalizing: results committed on-chain"
    if batch.status in ("completed", "cancelled") and batch.commitment is not None:
        settled = "settled on-chain" if batch.finalized else "in the challenge window, then settled on-chain"
        return f"{batch.status}: results committed, {settled}"
    return batch.status


def batch_page(inputs: BatchInputs, now: int) -> Page:
    """A batch's progress and where it stands, in figures only: no line's content, no custom_id, no file."""
    batch = inputs.batch
    page = Page(f"Batch {batch.id}", f"{EXPLORER_DATA}/batches/{batch.id}")
    own = f"/v1/batches/{batch.id}"
    f = page.figures
    f["batch.status"] = Figure(batch.status, api(own, "status"))
    f["batch.stage"] = Figure(batch_stage(inputs), api(own, "status"))
    f["batch.detail"] = Figure(batch.status_detail or "—", api(own, "status_detail"))
    f["batch.total"] = count(batch.request_total, api(own, "request_counts.total"))
    f["batch.completed"] = count(batch.completed_count, api(own, "request_counts.completed"))
    f["batch.failed"] = count(batch.failed_count, api(own, "request_counts.failed"))
    done = batch.completed_count + batch.failed_count
    share = 100 * done / batch.request_total if batch.request_total else 0.0
    f["batch.progress"] = Figure(f"{share:.0f}%", api(own, "request_counts"))
    page.series["progress"] = [round(share, 1)]
    f["batch.input_tokens"] = count(inputs.tokens[0], api(own, "usage.input_tokens"))
    f["batch.output_tokens"] = count(inputs.tokens[1], api(own, "usage.output_tokens"))
    units_source = Source("coordinator: the batch's work units", page.data)
    for status in ("queued", "leased", "done"):
        f[f"batch.units.{status}"] = count(inputs.units.get(status, 0), units_source)
    f["batch.model"] = Figure(batch.model, api(own, "model"))
    f["batch.task"] = Figure(str(batch.task_id), api(own, "task_id"), href=f"/explorer/tasks/{batch.task_id}")
    f["batch.miners"] = count(len(batch.miners or []), call("TaskRegistry", "minersOf", batch.task_id))
    f["batch.signed"] = count(inputs.signed, api(f"{own}/commitment", "signatures"))
    f["batch.created"] = moment(batch.created_at, now, api(own, "created_at"))
    f["batch.expires"] = moment(batch.expires_at, now, api(own, "expires_at"))
    f["batch.results_root"] = digest(batch.results_root or "", api(own, "results_root"))
    f["batch.commit_tx"] = digest(batch.commit_tx or "", api(own, "commit_tx"))
    return page


# -- a task


@dataclass(frozen=True)
class TaskInputs:
    """What the task page reads on-chain."""

    task_id: int
    task: Task
    escrow: int
    prices: TaskPrices
    challenge_ends_at: int
    miners: Sequence[str]
    signers: Sequence[str]
    signed_mask: int
    audit: Audit
    owner_dispute: int
    chain_time: int
    symbol: str


@dataclass
class TaskPage(Page):
    miners: list[str] = field(default_factory=list)
    audit_dispute: int = 0
    owner_dispute: int = 0


def task_page(inputs: TaskInputs, names: Mapping[bytes, str], now: int) -> TaskPage:
    """An on-chain task: status, escrow, usage and payment, deadlines, the commitment and who signed it, and
    its random audit."""
    task, tid, symbol = inputs.task, inputs.task_id, inputs.symbol
    page = TaskPage(f"Task {tid}", f"{EXPLORER_DATA}/tasks/{tid}", miners=list(inputs.miners))
    get = call("TaskRegistry", "getTask", tid)
    f = page.figures
    f["task.status"] = Figure(task.status.name.lower(), get)
    f["task.owner"] = address(task.owner, get)
    f["task.model"] = Figure(model_label(task.model_id, names), get, title=hex0x(task.model_id))
    f["task.requests"] = count(task.request_count, get)
    f["task.max_price"] = Figure(amount(task.max_price, symbol), get)
    f["task.escrow"] = Figure(amount(inputs.escrow, symbol), call("PaymentEscrow", "escrowOf", tid))
    f["task.input_tokens"] = count(task.input_tokens, get)
    f["task.output_tokens"] = count(task.output_tokens, get)
    f["task.payment"] = Figure(amount(task.payment, symbol), get)
    f["task.fee"] = Figure(amount(task.fee, symbol), get)
    f["task.stake_lock"] = Figure(amount(task.stake_lock, symbol), get)
    prices = call("TaskRegistry", "pricesOf", tid)
    f["task.price_in"] = Figure(amount(inputs.prices.input_per_million, symbol), prices)
    f["task.price_out"] = Figure(amount(inputs.prices.output_per_million, symbol), prices)
    # deadlines against the chain's clock, which they are measured in
    f["task.deadline"] = moment(task.deadline, inputs.chain_time, get)
    f["task.committed"] = moment(task.committed_at, inputs.chain_time, get)
    window = call("TaskRegistry", "challengeEndsAt", tid)
    f["task.challenge_ends"] = moment(inputs.challenge_ends_at, inputs.chain_time, window)
    f["task.results_root"] = digest(hex0x(task.results_root), get)
    f["task.input_root"] = digest(hex0x(task.input_root), get)
    signed = call("TaskRegistry", "signedMaskOf", tid)
    for index, miner in enumerate(inputs.miners):
        key = f"task.miner.{miner}"
        f[f"{key}.address"] = address(miner, call("TaskRegistry", "minersOf", tid))
        signer = inputs.signers[index] if index < len(inputs.signers) else ""
        f[f"{key}.signer"] = (
            address(signer, call("TaskRegistry", "signersOf", tid)) if signer else Figure("—", signed)
        )
        f[f"{key}.signed"] = Figure("signed" if inputs.signed_mask >> index & 1 else "not signed", signed)
    audit, audit_source = inputs.audit, call("Audits", "auditOf", tid)
    f["task.audit"] = Figure(audit_state(audit), audit_source)
    f["task.audit_line"] = (
        count(audit.request_index, audit_source) if audit.selected else Figure("—", audit_source)
    )
    page.audit_dispute, page.owner_dispute = audit.dispute_id, inputs.owner_dispute
    if audit.dispute_id:
        f["task.audit_dispute"] = Figure(
            str(audit.dispute_id), audit_source, href=f"/explorer/disputes/{audit.dispute_id}"
        )
    if inputs.owner_dispute:
        f["task.owner_dispute"] = Figure(
            str(inputs.owner_dispute),
            call("Arbitration", "disputeOfTask", tid),
            href=f"/explorer/disputes/{inputs.owner_dispute}",
        )
    return page


def audit_state(audit: Audit) -> str:
    """Where a task's random audit stands."""
    if not audit.seed_block:
        return "not drawn"
    if not audit.sealed:
        return f"drawn from block {audit.seed_block}, not sealed yet"
    if not audit.selected:
        return "sealed: not selected"
    forced = " (forced: its seed expired)" if audit.forced else ""
    if not audit.dispute_id:
        return f"sealed: line {audit.request_index} selected{forced}, no verifier opened it"
    return f"selected{forced}: audit dispute {audit.dispute_id}{', settled' if audit.settled else ''}"


# -- disputes


@dataclass(frozen=True)
class RoundInputs:
    round: Round
    jurors: Sequence[tuple[str, Juror]]


@dataclass(frozen=True)
class DisputeInputs:
    dispute_id: int
    dispute: Dispute
    rounds: Sequence[RoundInputs]
    pipeline: Sequence[str]
    resolution: Resolution | None
    chain_time: int
    symbol: str


@dataclass(frozen=True)
class RoundView:
    index: int
    jurors: list[str]


@dataclass
class DisputePage(Page):
    rounds: list[RoundView] = field(default_factory=list)
    pipeline: list[str] = field(default_factory=list)
    task_id: int = 0


OUTCOMES = {
    DisputeStatus.OPEN: "open",
    DisputeStatus.MINERS_AT_FAULT: "miners at fault: slashed, the owner refunded",
    DisputeStatus.MINERS_CORRECT: "miners correct: the results stand, the bond pays jurors and miners",
    DisputeStatus.NO_DECISION: "no decision: the results stand",
}
VOTES = {
    Vote.NONE: "not revealed",
    Vote.MINERS_CORRECT: "miners correct",
    Vote.MINERS_AT_FAULT: "miners at fault",
}


def dispute_page(inputs: DisputeInputs, now: int) -> DisputePage:
    """A dispute or audit: each round's drawn jurors and their commit/reveal progress, the outcome and the
    money it moved."""
    d, did, symbol = inputs.dispute, inputs.dispute_id, inputs.symbol
    kind = "Audit dispute" if d.audit else "Dispute"
    page = DisputePage(f"{kind} {did}", f"{EXPLORER_DATA}/disputes/{did}", task_id=d.task_id)
    page.pipeline = list(inputs.pipeline)
    get = call("Arbitration", "getDispute", did)
    f = page.figures
    f["dispute.status"] = Figure(OUTCOMES[d.status], get)
    f["dispute.kind"] = Figure("random audit" if d.audit else "the owner's dispute", get)
    f["dispute.task"] = Figure(str(d.task_id), get, href=f"/explorer/tasks/{d.task_id}")
    f["dispute.line"] = count(d.request_index, get)
    f["dispute.opener"] = address(d.opener, get)
    f["dispute.challenger"] = address(d.challenger, get)
    f["dispute.round"] = count(d.round, get)
    f["dispute.bond"] = Figure(amount(d.bond, symbol), get)
    f["dispute.leaf"] = digest(hex0x(d.leaf_hash), get)
    f["dispute.opened"] = moment(d.opened_at, inputs.chain_time, get)
    current = inputs.rounds[-1].round if inputs.rounds else None
    if d.status == DisputeStatus.OPEN and current is not None:
        phase = current_phase(d, current, inputs.chain_time)
        f["dispute.phase"] = Figure(phase.name.lower(), call("Arbitration", "roundOf", did, d.round))
        f["dispute.phase_ends"] = moment(
            current.ends_at(phase), inputs.chain_time, call("Arbitration", "roundOf", did, d.round)
        )
    else:
        f["dispute.phase"] = Figure("resolved", get)
        f["dispute.phase_ends"] = Figure("—", get)
    bonds = 0
    for index, rin in enumerate(inputs.rounds):
        r, key, source = rin.round, f"round.{index}", call("Arbitration", "roundOf", did, index)
        bonds += r.bond
        f[f"{key}.seats"] = Figure(f"{r.seats_drawn} of {r.seats}", source)
        f[f"{key}.commits"] = Figure(
            f"{sum(1 for _, j in rin.jurors if any(j.commitment))} of {len(rin.jurors)}",
            call("Arbitration", "jurorOf", did, index, "juror"),
        )
        f[f"{key}.reveals"] = Figure(
            f"{sum(1 for _, j in rin.jurors if j.vote != Vote.NONE)} of {len(rin.jurors)}",
            call("Arbitration", "jurorOf", did, index, "juror"),
        )
        f[f"{key}.correct"] = count(r.votes_correct, source)
        f[f"{key}.at_fault"] = count(r.votes_at_fault, source)
        payer = "the audit pool" if int(r.bond_payer, 16) == 0 else short(r.bond_payer)
        f[f"{key}.bond"] = Figure(f"{amount(r.bond, symbol)} from {payer}", source, title=r.bond_payer)
        f[f"{key}.seed"] = count(r.seed_block, source)
        f[f"{key}.commit_by"] = moment(r.commit_deadline, inputs.chain_time, source)
        f[f"{key}.reveal_by"] = moment(r.reveal_deadline, inputs.chain_time, source)
        for juror, record in rin.jurors:
            jkey, jsource = f"{key}.juror.{juror}", call("Arbitration", "jurorOf", did, index, short(juror))
            f[f"{jkey}.address"] = address(juror, call("Arbitration", "jurorsOf", did, index))
            f[f"{jkey}.seats"] = count(record.seats, jsource)
            f[f"{jkey}.committed"] = Figure("committed" if any(record.commitment) else "—", jsource)
            f[f"{jkey}.vote"] = Figure(VOTES[record.vote], jsource)
        page.rounds.append(RoundView(index, [j for j, _ in rin.jurors]))
    f["money.bonds"] = Figure(
        amount(bonds, symbol), call("Arbitration", "roundOf", did, "0.." + str(d.round))
    )
    resolved = inputs.resolution
    event = Source(f"Arbitration event DisputeResolved(disputeId={did})")
    for name, value in (
        ("slashed", resolved.slashed if resolved else None),
        ("juror_rewards", resolved.juror_rewards if resolved else None),
        ("penalties", resolved.penalties if resolved else None),
    ):
        f[f"money.{name}"] = Figure(amount(value, symbol) if value is not None else "—", event)
    for index, miner in enumerate(page.pipeline):
        f[f"dispute.pipeline.{index}"] = address(miner, call("Arbitration", "pipelineOf", did))
    return page


@dataclass(frozen=True)
class VerifierInputs:
    address: str
    record: Verifier
    models: Sequence[bytes]


@dataclass
class DisputesPage(Page):
    disputes: list[int] = field(default_factory=list)
    verifiers: list[str] = field(default_factory=list)


def disputes_page(
    disputes: Mapping[int, Dispute],
    verifiers: Sequence[VerifierInputs],
    seat_stake: int,
    names: Mapping[bytes, str],
    symbol: str,
) -> DisputesPage:
    """The newest disputes and audits, and the verifiers with their stake, seats and models."""
    page = DisputesPage("Disputes and verifiers", f"{EXPLORER_DATA}/disputes")
    f = page.figures
    for did, d in disputes.items():
        key, get = f"dispute.{did}", call("Arbitration", "getDispute", did)
        page.disputes.append(did)
        f[f"{key}.id"] = Figure(str(did), get, href=f"/explorer/disputes/{did}")
        f[f"{key}.kind"] = Figure("audit" if d.audit else "dispute", get)
        f[f"{key}.task"] = Figure(str(d.task_id), get, href=f"/explorer/tasks/{d.task_id}")
        f[f"{key}.status"] = Figure(d.status.name.lower(), get)
        f[f"{key}.round"] = count(d.round, get)
        f[f"{key}.bond"] = Figure(amount(d.bond, symbol), get)
    for v in verifiers:
        key, get = f"verifier.{v.address}", call("VerifierRegistry", "verifierOf", v.address)
        page.verifiers.append(v.address)
        f[f"{key}.address"] = address(v.address, Source("VerifierRegistry event VerifierRegistered"))
        f[f"{key}.stake"] = Figure(amount(v.record.stake, symbol), get)
        f[f"{key}.locked"] = Figure(amount(v.record.locked, symbol), get)
        seats = v.record.stake // seat_stake if seat_stake else 0
        held = v.record.locked // seat_stake if seat_stake else 0
        f[f"{key}.seats"] = Figure(f"{held} of {seats}", call("VerifierRegistry", "minStake"))
        f[f"{key}.state"] = Figure(
            "active" if v.record.active else "exiting" if v.record.registered else "gone", get
        )
        f[f"{key}.models"] = Figure(
            ", ".join(model_label(m, names) for m in v.models) or "—",
            call("VerifierRegistry", "modelsOf", v.address),
        )
    return page
