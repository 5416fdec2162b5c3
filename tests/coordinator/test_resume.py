"""Progress reports keep a unit's lines' output tokens so far, heard only from the head the unit is leased to;
the next head to claim the unit gets them to resume from (counted in /metrics), and the unit's results clear
them. Migration 0004 adds and removes their column."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from eth_account import Account

from coordinator.config import Settings
from coordinator.db.migrate import downgrade, upgrade
from coordinator.db.models import PipelineRecord, WorkUnit
from coordinator.db.session import Database
from tests.coordinator.conftest import MODEL_NAME, ApiServer
from tests.coordinator.helpers import add_requests, chat_line, jsonl, running_batch

NOW = 1_000
MAX_TOKENS = 8
PROMPT_TOKENS = 12
LINES = [chat_line(f"line-{i}", f"question {i}?", max_tokens=MAX_TOKENS) for i in range(3)]
FIRST_HEAD, SECOND_HEAD, STRANGER = Account.create(), Account.create(), Account.create()


@pytest.fixture
def database(settings: Settings) -> Iterator[Database]:
    db = Database(settings.database_url)
    yield db
    db.dispose()


def add_unit(database: Database) -> tuple[int, int]:
    """A running batch of LINES in one unit, queued on a 1-stage pipeline headed by FIRST_HEAD; returns the
    unit's id and that of another pipeline, headed by SECOND_HEAD."""
    content = jsonl(LINES)
    with database.session() as session:
        batch = running_batch(session, STRANGER.address, len(LINES), NOW, content)
        add_requests(session, batch, LINES, PROMPT_TOKENS, MAX_TOKENS)
        pipelines = [
            PipelineRecord(
                model=MODEL_NAME,
                version=1,
                stages=[{"miner": head.address, "start": 0, "end": 4}],
                members=[head.address],
                active=True,
                created_at=NOW,
            )
            for head in (FIRST_HEAD, SECOND_HEAD)
        ]
        session.add_all(pipelines)
        session.flush()
        unit = WorkUnit(
            batch_id=batch.id,
            line_indices=list(range(len(LINES))),
            pipeline_id=pipelines[0].id,
            status="queued",
            attempts=0,
            created_at=NOW,
        )
        session.add(unit)
        session.flush()
        return unit.id, pipelines[1].id


def report(client: httpx.Client, unit_id: int, lines: dict[int, Any]) -> httpx.Response:
    body = {"lines": [{"index": index, "output_token_ids": tokens} for index, tokens in lines.items()]}
    return client.post(f"/v1/miners/work/{unit_id}/progress", json=body)


def resumes(claimed: dict[str, Any]) -> list[list[int]]:
    return [line["resume"] for line in claimed["lines"]]


def test_a_unit_its_head_lost_resumes_from_the_reported_progress(api: ApiServer, database: Database) -> None:
    unit_id, second_pipeline = add_unit(database)
    first, second, stranger = api.client(FIRST_HEAD), api.client(SECOND_HEAD), api.client(STRANGER)
    assert resumes(first.post("/v1/miners/work/claim").json()) == [[], [], []]
    assert report(first, unit_id, {0: [5, 6], 1: [9]}).json() == {"stored": 2}
    assert report(first, unit_id, {0: [5, 6, 7]}).json() == {"stored": 1}  # line 1 keeps its tokens

    refused = [
        (stranger, {0: [1]}, 404),  # not the head of the unit's pipeline
        (first, {3: [1]}, 400),  # not a line of the unit
        (first, {2: [1] * MAX_TOKENS}, 400),  # a whole output is a result, not progress
        (first, {2: []}, 400),
        (first, {2: [-1]}, 400),
    ]
    for client, lines, status in refused:
        assert report(client, unit_id, lines).status_code == status, lines
    twice = {"lines": [{"index": 2, "output_token_ids": [1]}] * 2}
    assert first.post(f"/v1/miners/work/{unit_id}/progress", json=twice).status_code == 400

    # the first head goes silent: the worker gives the unit to the other pipeline (as dispatch.reroute does)
    with database.session() as session:
        unit = session.get(WorkUnit, unit_id)
        assert unit is not None
        unit.pipeline_id, unit.status, unit.leased_until = second_pipeline, "queued", None
    assert report(first, unit_id, {0: [5, 6, 7, 8]}).status_code == 404  # no longer its unit
    assert report(second, unit_id, {0: [5]}).status_code == 409  # not claimed yet
    assert resumes(second.post("/v1/miners/work/claim").json()) == [[5, 6, 7], [9], []]
    assert "batchmarket_resumed_lines_total 2.0" in second.get("/metrics", auth=None).text

    results = [
        {
            "index": index,
            "text": "x",
            "output_token_ids": [5, 6, 7, 8],
            "prompt_tokens": PROMPT_TOKENS,
            "finish_reason": "length",
        }
        for index in range(len(LINES))
    ]
    stored = second.post(f"/v1/miners/work/{unit_id}/results", json={"results": results})
    assert stored.json() == {"stored": len(LINES)}
    assert report(second, unit_id, {0: [5]}).json() == {"stored": 0}  # done: nothing left to resume
    with database.session() as session:
        unit = session.get(WorkUnit, unit_id)
        assert unit is not None and (unit.status, unit.partial_outputs) == ("done", None)


def test_migration_0004_adds_and_removes_the_partial_outputs_column(database_url: str) -> None:
    engine = sa.create_engine(database_url)

    def columns() -> set[str]:
        return {column["name"] for column in sa.inspect(engine).get_columns("work_units")}

    try:
        assert "partial_outputs" in columns()
        downgrade(database_url, "0003")
        assert "partial_outputs" not in columns()
        upgrade(database_url)
        assert "partial_outputs" in columns()
    finally:
        engine.dispose()


def test_a_head_that_gives_up_a_unit_ends_its_lease_at_once(api: ApiServer, database: Database) -> None:
    """Only the head the unit is leased to can give it back; then its lease has ended, and the next sweep
    hands it on (with its progress) instead of waiting out the lease."""
    unit_id, _ = add_unit(database)
    first, second, stranger = api.client(FIRST_HEAD), api.client(SECOND_HEAD), api.client(STRANGER)
    first.post("/v1/miners/work/claim").raise_for_status()
    with database.session() as session:
        leased = session.get(WorkUnit, unit_id)
        assert leased is not None and leased.leased_until is not None
        lease_ends = leased.leased_until
    for other in (second, stranger):  # neither heads the unit's pipeline: nothing changes
        assert other.post("/v1/miners/work/give-back", json={"units": [unit_id]}).json() == {"batches": 0}
    assert first.post("/v1/miners/work/give-back", json={"units": []}).status_code == 400
    given = time.time()
    assert first.post("/v1/miners/work/give-back", json={"units": [unit_id]}).json() == {"batches": 1}
    with database.session() as session:
        unit = session.get(WorkUnit, unit_id)
        assert unit is not None and unit.status == "leased"
        assert unit.leased_until is not None and unit.leased_until <= given + 1 < lease_ends
