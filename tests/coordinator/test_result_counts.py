"""A batch counts its results as they are stored (a status poll reads two columns instead of counting rows):
concurrent heads, retries and failed units leave the counts equal to the stored rows; a result submitted
while the worker moves the batch on waits for it and is refused; migration 0011 counts existing results."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from eth_account import Account
from sqlalchemy import func, select

from coordinator.db.migrate import downgrade, upgrade
from coordinator.db.models import Batch, PipelineRecord, Result, WorkUnit
from coordinator.db.session import Database
from coordinator.services import dispatch
from coordinator.services.errors import Conflict
from tests.coordinator.conftest import MODEL_NAME
from tests.coordinator.helpers import add_requests, chat_line, jsonl, running_batch

NOW = 1_000
UNITS, PER_UNIT = 4, 3
LINES = [chat_line(f"line-{i}", f"question {i}?", max_tokens=4) for i in range(UNITS * PER_UNIT)]
PROMPT_TOKENS = 9
OWNER = Account.create().address
HEADS = [Account.create().address for _ in range(UNITS)]


@pytest.fixture
def database(database_url: str) -> Iterator[Database]:
    db = Database(database_url)
    yield db
    db.dispose()


def add_batch(database: Database) -> tuple[str, list[int]]:
    """A running batch of LINES cut into UNITS units, each leased to a pipeline of its own head."""
    with database.session() as session:
        batch = running_batch(session, OWNER, len(LINES), NOW, jsonl(LINES))
        add_requests(session, batch, LINES, PROMPT_TOKENS, max_tokens=4)
        units = []
        for number, head in enumerate(HEADS):
            pipeline = PipelineRecord(
                model=MODEL_NAME,
                version=1,
                stages=[{"miner": head, "start": 0, "end": 4}],
                members=[head],
                active=True,
                created_at=NOW,
            )
            session.add(pipeline)
            session.flush()
            unit = WorkUnit(
                batch_id=batch.id,
                line_indices=list(range(number * PER_UNIT, (number + 1) * PER_UNIT)),
                pipeline_id=pipeline.id,
                status="leased",
                leased_until=NOW + 60,
                attempts=1,
                created_at=NOW,
            )
            session.add(unit)
            session.flush()
            units.append(unit.id)
        return batch.id, units


def results(lines: range) -> list[dispatch.LineResult]:
    return [dispatch.LineResult(i, "ok", (1, 2), PROMPT_TOKENS, "length") for i in lines]


def counts(database: Database, batch_id: str) -> tuple[int, int, int, int]:
    """The batch's counts, then the stored rows counted: (completed, failed, ok rows, failed rows)."""
    with database.session() as session:
        batch = session.get(Batch, batch_id)
        assert batch is not None

        def rows(ok: bool) -> int:
            query = select(func.count()).select_from(Result)
            return int(session.scalar(query.where(Result.batch_id == batch_id, Result.ok == ok)) or 0)

        return batch.completed_count, batch.failed_count, rows(True), rows(False)


def test_counts_follow_concurrent_heads_retries_and_failed_units(database: Database) -> None:
    batch_id, units = add_batch(database)
    # three heads store their units at once, each twice (a retry after a lost answer stores nothing new)
    errors: list[BaseException] = []

    def store(number: int) -> None:
        try:
            for _ in range(2):
                with database.session() as session:
                    lines = range(number * PER_UNIT, (number + 1) * PER_UNIT)
                    dispatch.submit(session, HEADS[number], units[number], results(lines), NOW)
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=store, args=(number,)) for number in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert counts(database, batch_id) == (9, 0, 9, 0)

    # the last unit: one line came back, then the unit failed everywhere: only the two others are errors
    last = units[-1]
    with database.session() as session:
        dispatch.submit(session, HEADS[-1], last, results(range(9, 10)), NOW)
    with database.session() as session:
        batch, unit = session.get(Batch, batch_id), session.get(WorkUnit, last)
        assert batch is not None and unit is not None
        dispatch.fail_unit(session, batch, unit, "failed on every pipeline", NOW)
        session.flush()
        assert dispatch.result_count(batch) == len(LINES)
    assert counts(database, batch_id) == (10, 2, 10, 2)


def test_a_result_submitted_while_the_worker_moves_the_batch_on_is_refused(database: Database) -> None:
    """The worker holds the batch (as `lifecycle.advance` does) and moves it to finalizing; a head's results
    for it wait for the worker's transaction and are then refused, so nothing lands outside the commitment."""
    if database.url.startswith("sqlite"):
        pytest.skip("SQLite runs one writer at a time: the head cannot start while the worker writes")
    batch_id, units = add_batch(database)
    worker_holds, refused = threading.Event(), []

    def head() -> None:
        worker_holds.wait()
        try:
            with database.session() as session:
                dispatch.submit(session, HEADS[0], units[0], results(range(PER_UNIT)), NOW)
        except Conflict as exc:
            refused.append(exc.code)

    thread = threading.Thread(target=head)
    thread.start()
    with database.session() as session:
        batch = session.get(Batch, batch_id, with_for_update=True)
        assert batch is not None
        worker_holds.set()
        thread.join(timeout=1)
        assert thread.is_alive(), "the head's results did not wait for the worker's lock on the batch"
        batch.status = "finalizing"
    thread.join()
    assert refused == ["batch_not_running"]
    assert counts(database, batch_id) == (0, 0, 0, 0)


def test_migration_0011_counts_the_results_already_stored(database: Database) -> None:
    batch_id, units = add_batch(database)
    with database.session() as session:
        dispatch.submit(session, HEADS[0], units[0], results(range(PER_UNIT)), NOW)
    with database.session() as session:
        batch, unit = session.get(Batch, batch_id), session.get(WorkUnit, units[1])
        assert batch is not None and unit is not None
        dispatch.fail_unit(session, batch, unit, "failed", NOW)
    engine = sa.create_engine(database.url)
    try:
        downgrade(database.url, "0010")
        assert "completed_count" not in {c["name"] for c in sa.inspect(engine).get_columns("batches")}
        upgrade(database.url)
    finally:
        engine.dispose()
    assert counts(database, batch_id) == (PER_UNIT, PER_UNIT, PER_UNIT, PER_UNIT)
