"""Failures mid-batch: a miner killed (its units go to the other miner; restarted, it still signs what it
served before, from its journal), a head killed mid-unit after reporting its lines' progress (the other
pipeline resumes them from their output tokens so far), a stage of a 2-stage pipeline killed (the coordinator
re-plans over the survivors), a stage that lost its record of lines it served (they are served again), a
stage killed for good (the lines it served are served again without it, and
the others commit without its signature, paying it nothing), and the API and the worker restarted. Either way
the batch completes and every custom_id appears exactly once in the verified output."""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import Iterator

import httpx
import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session

from client_sdk.client import Client
from client_sdk.protocol.task import TaskStatus
from coordinator.db.models import Batch, PipelineRecord, Result, WorkUnit
from demo.services import postgres_server
from demo.system import UNIT, LocalSystem, SystemConfig
from tests.coordinator.helpers import chat_line, jsonl
from tests.e2e.conftest import wait_for

REQUESTS = 64
# every node signs with a key apart from its account, as a careful operator runs it (and as revoking a leaked
# signer needs)
FAST_FAILOVER = SystemConfig(
    work_unit_size=16, work_lease_s=4, heartbeat_ttl_s=3, heartbeat_s=0.5, separate_signers=True
)


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def system(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalSystem]:
    """The whole market on each database the coordinator supports."""
    with contextlib.ExitStack() as stack:
        config = FAST_FAILOVER
        if request.param == "postgresql":
            try:
                url = stack.enter_context(postgres_server())
            except (FileNotFoundError, RuntimeError) as exc:
                pytest.skip(f"PostgreSQL tests skipped: cannot start a server ({exc})")
            config = dataclasses.replace(config, database_url=url)
        yield stack.enter_context(LocalSystem(tmp_path_factory.mktemp("system"), config))


def submit(client: Client, tag: str, max_tokens: int = 24) -> str:
    prompts = [f"tell me about the number {i}" for i in range(REQUESTS)]
    lines = [chat_line(f"{tag}-{i}", prompt, max_tokens=max_tokens) for i, prompt in enumerate(prompts)]
    file = client.files.create(file=jsonl(lines), purpose="batch")
    return client.batches.create(
        input_file_id=file.id, endpoint="/v1/chat/completions", max_price=5 * UNIT
    ).id


def completed(client: Client, batch_id: str) -> int:
    return client.batches.retrieve(batch_id).request_counts.completed


def assert_exactly_once(client: Client, batch_id: str, tag: str) -> None:
    batch = client.batches.wait(batch_id, poll_s=0.5, timeout_s=240)
    assert batch.status == "completed"
    results = client.batches.results(batch_id)
    assert results.errors == []
    assert sorted(v.line["custom_id"] for v in results.output) == sorted(
        f"{tag}-{i}" for i in range(REQUESTS)
    )


def served_without(client: Client, batch_id: str) -> bool:
    """Every line served while a miner is down: the batch is finalizing, waiting for the signature of the
    lines the miner finished before its crash; or, when it finished none of them, completed already."""
    return client.batches.retrieve(batch_id).status in ("finalizing", "completed")


# Outputs long enough that a batch cannot finish between two polls of its progress (at 24 tokens a line, all
# 64 lines once finished within a second, and a test waiting to see them part done never did).
PART_DONE_TOKENS = 96


def test_a_killed_miner_loses_no_line(system: LocalSystem) -> None:
    client = system.client()
    batch_id = submit(client, "kill", PART_DONE_TOKENS)
    wait_for(lambda: 0 < completed(client, batch_id) < REQUESTS, poll=0.1)
    system.stop("miner0", kill=True)
    wait_for(lambda: served_without(client, batch_id), timeout=180)
    system.start_miner(0)  # back from the crash: it signs what it served before, from its journal
    assert_exactly_once(client, batch_id, "kill")


def servers_of(system: LocalSystem, batch_id: str) -> set[str]:
    """The miners that served the batch's stored lines so far."""
    engine = sa.create_engine(system.database_url)
    try:
        with Session(engine) as session:
            pipelines = session.scalars(sa.select(Result.pipeline).where(Result.batch_id == batch_id))
            return {miner for pipeline in pipelines for miner in pipeline}
    finally:
        engine.dispose()


def earnings_once_earlier_tasks_settle(system: LocalSystem) -> dict[str, int]:
    """Settles the tasks of the module's earlier batches (past their challenge window: every one finalized,
    as each of them completed) and returns each miner's earnings then, what a new task's settlement adds
    to."""
    market = system.market
    system.advance_chain_time(system.config.challenge_window + 1)
    earlier = range(1, market.tasks.task_count() + 1)
    wait_for(lambda: all(market.tasks.get_task(t).status == TaskStatus.FINALIZED for t in earlier))
    return {m.address: market.escrow.balance_of(m.address) for m in system.miner_accounts}


def assert_settles_leaving_out(
    system: LocalSystem, task_id: int, left_out: str, before: dict[str, int]
) -> None:
    """Task `task_id` pays `left_out` nothing and the others' shares add up to the payment less the fee;
    once settled, every miner's earnings grew by exactly its committed amount (from `before`) and its stake
    is whole and unlocked."""
    market = system.market
    miners = market.tasks.miners_of(task_id)
    amounts = dict(zip(miners, market.tasks.miner_amounts_of(task_id), strict=True))
    task = market.tasks.get_task(task_id)
    assert amounts[left_out] == 0
    assert sum(amounts.values()) == task.payment - task.payment * system.config.fee_bps // 10_000
    system.advance_chain_time(system.config.challenge_window + 1)
    wait_for(lambda: market.tasks.get_task(task_id).status == TaskStatus.FINALIZED)
    for miner in miners:
        assert market.escrow.balance_of(miner) - before[miner] == amounts[miner]
        stake = market.registry.stake_of(miner)
        assert (stake.locked, stake.free) == (0, system.config.miner_stake)


@pytest.mark.parametrize("system", ["sqlite"], indirect=True)  # the coordinator's rule, not the database's
def test_a_miner_that_revoked_its_signer_is_left_out_and_paid_nothing(system: LocalSystem) -> None:
    """A miner's signer key leaked mid-batch: its own account revokes that signer on the task. Its node stays
    up and offers its signature, which the task now refuses; the coordinator serves the lines it served again
    on the other pipeline and commits without it: the miner that revoked is paid nothing and keeps its whole
    stake, the other is paid exactly its committed amount."""
    client, market = system.client(), system.market
    before = earnings_once_earlier_tasks_settle(system)
    batch_id = submit(client, "revoked", PART_DONE_TOKENS)
    served = wait_for(
        lambda: 0 < completed(client, batch_id) < REQUESTS and servers_of(system, batch_id), poll=0.1
    )
    task_id = client.batches.retrieve(batch_id).task_id
    [victim] = [m for m in system.miner_accounts if m.address == sorted(served)[0]]
    system.market_as(victim).tasks.revoke_signer(task_id)
    assert_exactly_once(client, batch_id, "revoked")

    index = market.tasks.miners_of(task_id).index(victim.address)
    bit = 1 << index
    # the key the node consented with, apart from its account, is the one revoked
    assert market.tasks.signers_of(task_id)[index] == system.signer_of(victim).address != victim.address
    assert market.tasks.revoked_mask_of(task_id) == bit
    assert market.tasks.signed_mask_of(task_id) & bit == 0
    assert left_out_miners_of(system, batch_id) == [victim.address]  # no line of it is routed there again
    assert_settles_leaving_out(system, task_id, victim.address, before)


def left_out_miners_of(system: LocalSystem, batch_id: str) -> list[str] | None:
    """The miners the coordinator keeps batch `batch_id`'s lines away from, as its database has them."""
    engine = sa.create_engine(system.database_url)
    try:
        with Session(engine) as session:
            batch = session.get(Batch, batch_id)
            assert batch is not None
            return batch.left_out_miners
    finally:
        engine.dispose()


def head_halfway_through_a_unit(system: LocalSystem, max_tokens: int) -> tuple[str, int] | None:
    """The head of a pipeline holding a leased unit whose stored progress is at most halfway through its
    lines' outputs (so far from done), and how many of its lines have progress stored; None if none."""
    engine = sa.create_engine(system.database_url)
    try:
        with Session(engine) as session:
            for unit in session.scalars(sa.select(WorkUnit).where(WorkUnit.status == "leased")):
                pipeline = session.get(PipelineRecord, unit.pipeline_id)
                partials = (unit.partial_outputs or {}).values()
                if partials and max(map(len, partials)) <= max_tokens // 2 and pipeline is not None:
                    return pipeline.head, len(partials)
            return None
    finally:
        engine.dispose()


def resumed_lines(system: LocalSystem) -> float:
    """The lines the coordinator handed out to resume from output tokens, from its /metrics."""
    metrics = httpx.get(f"{system.api_url}/metrics", timeout=10).text
    [line] = [line for line in metrics.splitlines() if line.startswith("batchmarket_resumed_lines_total ")]
    return float(line.split()[1])


def test_a_head_killed_mid_unit_has_its_lines_resumed_from_their_tokens(system: LocalSystem) -> None:
    """Long outputs keep a unit in flight for a second or more (the tiny model decodes a step in a few ms):
    the head is killed once the coordinator holds its unit's progress, and the other pipeline resumes those
    lines from it."""
    client = system.client()
    system.wait_for_miners(range(len(system.miner_accounts)))  # the previous test restarted one
    max_tokens = 400  # of the tiny model's 512 positions; the prompts take 33 at most
    batch_id = submit(client, "resume", max_tokens)
    head, with_progress = wait_for(lambda: head_halfway_through_a_unit(system, max_tokens), poll=0.05)
    victim = [m.address for m in system.miner_accounts].index(head)
    system.stop(f"miner{victim}", kill=True)
    wait_for(lambda: served_without(client, batch_id), timeout=180)
    system.start_miner(victim)
    assert_exactly_once(client, batch_id, "resume")
    assert resumed_lines(system) >= with_progress >= 1  # the unit's next head got them all


def test_restarting_the_api_and_the_worker_loses_no_line(system: LocalSystem) -> None:
    client = system.client()
    system.wait_for_miners(range(len(system.miner_accounts)))  # the previous test restarted one
    batch_id = submit(client, "restart", PART_DONE_TOKENS)
    wait_for(lambda: 0 < completed(client, batch_id) < REQUESTS, poll=0.1)
    system.stop("worker", kill=True)
    system.stop("api")
    system.start_worker()
    system.start_api()
    assert_exactly_once(client, batch_id, "restart")


@pytest.fixture(scope="module")
def staged(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalSystem]:
    """Three miners that each hold half the model: one 2-stage pipeline and a spare."""
    config = dataclasses.replace(FAST_FAILOVER, miners=3, stages=2)
    with LocalSystem(tmp_path_factory.mktemp("staged"), config) as running:
        yield running


def active_stages(system: LocalSystem) -> list[str]:
    engine = sa.create_engine(system.database_url)
    try:
        with Session(engine) as session:
            [pipeline] = session.scalars(sa.select(PipelineRecord).where(PipelineRecord.active)).all()
            return pipeline.miners
    finally:
        engine.dispose()


def test_a_killed_stage_of_a_pipeline_loses_no_line(staged: LocalSystem) -> None:
    """The pipeline's second stage dies mid-batch: the coordinator re-plans over the head and the spare, the
    head drops the units it had in flight, and they run again on the new pipeline."""
    client = staged.client()
    batch_id = submit(client, "stage", PART_DONE_TOKENS)
    wait_for(lambda: 0 < completed(client, batch_id) < REQUESTS, poll=0.1)
    addresses = [m.address for m in staged.miner_accounts]
    victim = addresses.index(active_stages(staged)[1])
    staged.stop(f"miner{victim}", kill=True)
    wait_for(lambda: addresses[victim] not in active_stages(staged), timeout=60)
    wait_for(lambda: served_without(client, batch_id), timeout=180)
    staged.start_miner(victim)  # back, it signs the lines it served as a stage before the crash
    assert_exactly_once(client, batch_id, "stage")


def test_a_stage_that_lost_its_record_of_lines_has_them_served_again(staged: LocalSystem) -> None:
    """A line can leave the last stage before the stage journals it, so a crash in between loses the stage's
    record of a line the coordinator credits to it. Here the stage is killed mid-batch and three of its
    journaled lines are removed before it restarts: asked to sign, it names the lines it cannot vouch for,
    they are served again, and the batch completes instead of waiting for its signature for ever. (The head
    also gives up at once the units that died with the stage, told so by its heartbeat's answer.)"""
    client = staged.client()
    batch_id = submit(client, "unrecorded")
    wait_for(lambda: completed(client, batch_id) >= 16, poll=0.1)
    addresses = [m.address for m in staged.miner_accounts]
    victim = addresses.index(active_stages(staged)[1])
    staged.stop(f"miner{victim}", kill=True)
    journal = staged.workdir / f"miner{victim}-state" / "served.jsonl"
    task_id = client.batches.retrieve(batch_id).task_id
    rows = journal.read_text().splitlines()
    lines = [row for row in rows if "index" in json.loads(row)]  # not the row noting the task's acceptance
    forgotten = [row for row in lines if json.loads(row)["task_id"] == task_id][:3]
    assert len(forgotten) == 3
    journal.write_text("".join(row + "\n" for row in rows if row not in forgotten))
    staged.start_miner(victim)
    assert_exactly_once(client, batch_id, "unrecorded")


def test_a_stage_gone_for_good_is_left_out_and_paid_nothing(staged: LocalSystem) -> None:
    """The pipeline's second stage dies mid-batch and never comes back: once it has been silent for two
    heartbeat timeouts while the others sign, the lines it served are served again by the head and the spare,
    the commitment pays it nothing and goes on-chain without its signature, and settlement pays the others
    exactly their committed amounts while the gone miner gets its stake back and nothing else."""
    client = staged.client()
    before = earnings_once_earlier_tasks_settle(staged)
    batch_id = submit(client, "gone", PART_DONE_TOKENS)
    wait_for(lambda: 0 < completed(client, batch_id) < REQUESTS, poll=0.1)
    addresses = [m.address for m in staged.miner_accounts]
    victim = addresses.index(active_stages(staged)[1])
    staged.stop(f"miner{victim}", kill=True)
    assert_exactly_once(client, batch_id, "gone")

    assert_settles_leaving_out(staged, client.batches.retrieve(batch_id).task_id, addresses[victim], before)
    staged.start_miner(victim)  # leaves the module's system whole
