"""The fault matrix: a 200-line batch of lines as users send them (up to 256 output tokens each, so the
stages' KV pages are really used) over a 2-stage pipeline with a spare miner (PostgreSQL, Redis with its
append-only file), and in each run one part crashed with SIGKILL mid-batch and started again: the Celery
worker, the API (down for a moment, and down for 10 s while units finish), Redis, PostgreSQL, the first-stage
miner (once, and twice in one batch), the last-stage miner; a last-stage miner killed for good; a spare
that joins mid-task (a re-plan); and a first stage that floods the next with requests it never finishes
(FLOOD_BURSTS bursts of FLOOD_COUNT, each a page of the next stage's pool: miner.pipeline.flood). Each row
counts the lines completed, failed, duplicated (by custom_id) and lost in the verified output, the time to
finish, the time from the crash until the batch moved again, and whether every balance was exact to the unit
after settlement (the owner's refund, the coordinator's fee, each miner's committed share, every stake
unlocked). Target: 0 lost, 0 duplicated, 0 failed lines in every row,
and recovery within `recovery_target`: two heartbeat timeouts (a dead miner is noticed) and the head's stall
time (a step lost with a restarted stage is fed again), 30 s here.

`python -m bench.faults` writes bench/results/faults.txt and faults.png; `run_fault` is also what the fast
subset in tests/e2e/test_faults.py runs."""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import httpx
import sqlalchemy as sa
from rich.console import Console
from rich.table import Table
from sqlalchemy.orm import Session

from bench._report import figure, publish, report_table
from client_sdk.client import Batch, Client
from client_sdk.errors import UserError
from client_sdk.protocol.constants import FINAL_BATCH_STATUSES
from client_sdk.protocol.task import TaskStatus
from coordinator.db.models import PipelineRecord
from demo.system import UNIT, LocalSystem, SystemConfig
from miner.pipeline.head import STALL_S
from tests.coordinator.helpers import chat_line, jsonl
from tests.e2e.conftest import wait_for

LINES = 200
MAX_TOKENS = (
    256  # production line lengths: at 16 tokens a restarted head's leftovers never filled a page pool
)
MAX_PRICE = 20 * UNIT
# a coordinator that notices failures in seconds: heartbeats every second, a miner silent for 5 s is dead
CONFIG = SystemConfig(
    miners=3,
    stages=2,
    database="postgresql",
    work_unit_size=16,
    work_lease_s=10,
    heartbeat_ttl_s=5,
    heartbeat_s=1.0,
)
FAULTS: tuple[tuple[str, ...], ...] = (
    ("none",),
    ("worker",),
    ("api",),
    ("api, down 10 s",),
    ("redis",),
    ("postgresql",),
    ("first-stage miner",),
    ("first-stage miner", "first-stage miner"),
    ("last-stage miner",),
    ("last-stage miner, for good",),
    ("spare joins",),
    ("first stage floods",),
)
DOWN_S = 1.0  # how long a crashed part stays down before it is started again
OUTAGE_S = 10.0  # "down 10 s": longer than a unit takes, so units finish while the API is away
SPARE = "spare joins"  # the spare miner is stopped before the batch and started mid-task: a re-plan
FLOOD = "first stage floods"
# requests a burst adds to one step: the first burst fits the next stage's pool (about 1,000 pages here) and
# holds half of it, the next ones would take it past its bound and are refused whole
FLOOD_COUNT = 512
FLOOD_BURSTS = 16


@dataclass(frozen=True)
class Row:
    fault: str
    lines: int
    completed: int
    failed: int
    duplicated: int
    lost: int
    seconds: float
    recovery_s: float | None  # from the crash until another line was done; None: no crash
    balances_exact: bool
    status: str
    next_batch: bool  # a batch submitted once this one settled was served whole

    @property
    def clean(self) -> bool:
        return (
            self.completed == self.lines
            and self.failed == self.duplicated == self.lost == 0
            and self.balances_exact
            and self.status == "completed"
            and self.next_batch
        )


def run_fault(
    faults: tuple[str, ...],
    workdir: Path,
    lines: int = LINES,
    config: SystemConfig = CONFIG,
    max_tokens: int = MAX_TOKENS,
) -> Row:
    """One row of the matrix, on a fresh system in `workdir`: the faults one after another, the k-th of n
    once k/(n+1) of the lines are done ("none": no crash); its recovery is the slowest one's."""
    if FLOOD in faults:
        config = dataclasses.replace(config, flooding_heads=FLOOD_COUNT)
    with LocalSystem(workdir, config) as system:
        client = system.client()
        if SPARE in faults:
            _stop_spare(system)
        tag = "row"
        started = time.monotonic()
        batch_id = _submit(client, tag, lines, max_tokens)
        recoveries = []
        crashes = [f for f in faults if f != "none"]
        for k, fault in enumerate(crashes, start=1):
            wait_for(partial(_done_at_least, client, batch_id, lines * k // (len(crashes) + 1)))
            before = _done(client, batch_id)
            crashed = time.monotonic()
            _crash(system, fault)
            wait_for(partial(_moved_on, client, batch_id, before))
            recoveries.append(time.monotonic() - crashed)
        recovery = max(recoveries) if recoveries else None
        fault = " + ".join(faults)
        batch = wait_for(lambda: _final(client, batch_id), timeout=900)
        assert batch is not None  # wait_for returns only a truthy value
        seconds = time.monotonic() - started
        completed = failed = duplicated = 0
        lost = lines
        exact = False
        if batch.status == "completed":
            results = client.batches.results(batch_id)
            ids = Counter(str(v.line["custom_id"]) for v in results.output + results.errors)
            completed, failed = len(results.output), len(results.errors)
            duplicated = sum(n - 1 for n in ids.values() if n > 1)
            lost = len({f"{tag}-{i}" for i in range(lines)} - set(ids))
            exact = _settles_exactly(system, batch.task_id)
        served_next = _serves_next_batch(client, max_tokens)
        return Row(
            fault,
            lines,
            completed,
            failed,
            duplicated,
            lost,
            seconds,
            recovery,
            exact,
            batch.status,
            served_next,
        )


def _submit(client: Client, tag: str, lines: int, max_tokens: int) -> str:
    """A batch of `lines` chat lines (custom ids `tag`-i); its id."""
    requests = [chat_line(f"{tag}-{i}", f"count from {i}", max_tokens=max_tokens) for i in range(lines)]
    file = client.files.create(file=jsonl(requests), purpose="batch")
    return client.batches.create(
        input_file_id=file.id, endpoint="/v1/chat/completions", max_price=MAX_PRICE
    ).id


def _serves_next_batch(client: Client, max_tokens: int, lines: int = 16) -> bool:
    """After the fault: the pipeline serves a new batch whole, as it would have before."""
    batch_id = _submit(client, "next", lines, max_tokens)
    try:
        batch = wait_for(lambda: _final(client, batch_id), timeout=300)
    except AssertionError:  # not final in time
        return False
    assert batch is not None  # wait_for returns only a truthy value
    return batch.status == "completed" and batch.request_counts.completed == lines


def _stop_spare(system: LocalSystem) -> None:
    """Stops the last miner before any pipeline is planned (the others make the pipeline) and waits until the
    coordinator has dropped it."""
    system.stop(f"miner{_spare(system)}")
    time.sleep(2 * system.config.heartbeat_ttl_s)


def _spare(system: LocalSystem) -> int:
    return len(system.miner_accounts) - 1


def _crash(system: LocalSystem, fault: str) -> None:
    if fault == "worker":
        system.stop("worker", kill=True)
        time.sleep(DOWN_S)
        system.start_worker()
    elif fault.startswith("api"):
        system.stop("api", kill=True)
        time.sleep(OUTAGE_S if "down" in fault else DOWN_S)
        system.start_api()
    elif fault == SPARE:
        system.start_miner(_spare(system))
    elif fault == FLOOD:
        head = _stage_miner(system, 0)
        for _ in range(FLOOD_BURSTS):  # each signal: the head's next step carries a burst
            os.kill(system.processes[f"miner{head}"].pid, signal.SIGUSR1)
            time.sleep(0.25)
    elif fault == "redis":
        system.crash_redis(DOWN_S)
    elif fault == "postgresql":
        system.crash_database(DOWN_S)
    else:
        victim = _stage_miner(system, 0 if "first" in fault else -1)
        system.stop(f"miner{victim}", kill=True)
        if "for good" not in fault:
            time.sleep(DOWN_S)
            system.start_miner(victim)


def _stage_miner(system: LocalSystem, position: int) -> int:
    """The index of the miner at `position` of the active pipeline (0: its head, -1: its last stage)."""
    addresses: list[str] = [m.address for m in system.miner_accounts]
    return addresses.index(_active_stages(system)[position])


def _active_stages(system: LocalSystem) -> list[str]:
    engine = sa.create_engine(system.database_url)
    try:
        with Session(engine) as session:
            pipeline = session.scalars(sa.select(PipelineRecord).where(PipelineRecord.active)).first()
            assert pipeline is not None, "no active pipeline"
            return pipeline.miners
    finally:
        engine.dispose()


def _settles_exactly(system: LocalSystem, task_id: int) -> bool:
    """After the challenge window: the owner gets the max price less the payment, the coordinator its fee,
    each miner its committed share, and every stake is unlocked (this system's only task)."""
    market = system.market
    system.advance_chain_time(system.config.challenge_window + 1)
    wait_for(lambda: market.tasks.get_task(task_id).status == TaskStatus.FINALIZED)
    task = market.tasks.get_task(task_id)
    fee = task.payment * system.config.fee_bps // 10_000
    miners = market.tasks.miners_of(task_id)
    amounts = market.tasks.miner_amounts_of(task_id)
    paid = all(market.escrow.balance_of(m) == a for m, a in zip(miners, amounts, strict=True))
    unlocked = all(
        (s.locked, s.free) == (0, system.config.miner_stake) for s in map(market.registry.stake_of, miners)
    )
    return (
        paid
        and unlocked
        and sum(amounts) == task.payment - fee
        and market.escrow.balance_of(system.user.address) == task.max_price - task.payment
        and market.escrow.balance_of(system.coordinator.address) == fee
    )


def _done(client: Client, batch_id: str) -> int:
    try:
        counts = client.batches.retrieve(batch_id).request_counts
    except (UserError, httpx.HTTPError):  # the API (or what it needs) is down for the moment
        return -1
    return counts.completed + counts.failed


def _done_at_least(client: Client, batch_id: str, count: int) -> bool:
    return _done(client, batch_id) >= count


def _moved_on(client: Client, batch_id: str, done_before: int) -> bool:
    """More lines done than `done_before`, or the batch no longer in progress."""
    return _done(client, batch_id) > done_before or _status(client, batch_id) != "in_progress"


def _status(client: Client, batch_id: str) -> str:
    try:
        return client.batches.retrieve(batch_id).status
    except (UserError, httpx.HTTPError):
        return "unreachable"


def _final(client: Client, batch_id: str) -> Batch | None:
    try:
        batch = client.batches.retrieve(batch_id)
    except (UserError, httpx.HTTPError):
        return None
    return batch if batch.status in FINAL_BATCH_STATUSES else None


def recovery_target(config: SystemConfig = CONFIG) -> float:
    """Two heartbeat timeouts (a dead miner is dropped) and the head's stall time (a step lost with a stage
    that restarted is fed again in a new session)."""
    return 2 * config.heartbeat_ttl_s + STALL_S


def report(rows: list[Row], config: SystemConfig = CONFIG) -> Table:
    budget = recovery_target(config)
    table = report_table(
        title=f"Fault matrix: {rows[0].lines} lines of up to {MAX_TOKENS} output tokens, 2-stage pipeline + "
        f"spare, PostgreSQL, SIGKILLs mid-batch (recovery target: {budget:.0f} s: two heartbeat timeouts and "
        "the head's stall time)",
        columns=(
            "fault",
            "completed",
            "failed",
            "duplicated",
            "lost",
            "total s",
            "recovery s",
            "balances",
            "next batch",
        ),
        left=("fault",),
    )
    for row in rows:
        recovery = "" if row.recovery_s is None else f"{row.recovery_s:.1f}"
        if row.recovery_s is not None and row.recovery_s > budget:
            recovery += " (over)"
        table.add_row(
            row.fault,
            f"{row.completed}/{row.lines}",
            str(row.failed),
            str(row.duplicated),
            str(row.lost),
            f"{row.seconds:.0f}",
            recovery,
            "exact" if row.balances_exact else "WRONG",
            "served" if row.next_batch else "NOT SERVED",
            style=None if row.clean else "bold red",
        )
    return table


def plot(rows: list[Row], path: Path, config: SystemConfig = CONFIG) -> None:
    title = f"Fault matrix ({rows[0].lines} lines); target: 0 lost, duplicated or failed in every row"
    with figure(path, 1, 2, figsize=(12, 4), title=title) as (left, right):
        names = [row.fault for row in rows]
        left.barh(names, [row.seconds for row in rows], color="tab:blue")
        left.set_xlabel("seconds to finish the batch")
        left.invert_yaxis()
        crashed = [row for row in rows if row.recovery_s is not None]
        right.barh(
            [row.fault for row in crashed], [row.recovery_s or 0 for row in crashed], color="tab:orange"
        )
        right.axvline(recovery_target(config), color="red", linestyle="--", label="recovery target")
        right.set_xlabel("seconds from the crash until a line was done again")
        right.invert_yaxis()
        right.legend(loc="lower right")


def main(faults: tuple[tuple[str, ...], ...] = FAULTS) -> None:
    rows = []
    console = Console(width=140)
    for fault in faults:
        scratch = Path(tempfile.mkdtemp(prefix="fault-"))
        row = run_fault(fault, scratch)
        if row.clean and (row.recovery_s is None or row.recovery_s <= recovery_target()):
            shutil.rmtree(scratch)
        else:  # its logs say why
            console.print(f"kept the logs of {row.fault!r} in {scratch}")
        console.print(dataclasses.asdict(row))
        rows.append(row)
    publish("faults", [report(rows)], width=140, plot=partial(plot, rows))


if __name__ == "__main__":
    main()
