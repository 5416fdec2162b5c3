"""The main job end to end: a user submits a batch with the SDK and pays once; the coordinator plans over two
live miners, dispatches, collects, gets both miners' signatures and commits on-chain; after the challenge
window everyone is paid exactly what the commitment says."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from client_sdk.chain.types import TaskStatus
from demo.system import UNIT, LocalSystem
from tests.coordinator.helpers import chat_line, jsonl

REQUESTS = 24


@pytest.fixture(scope="module")
def system(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalSystem]:
    with LocalSystem(tmp_path_factory.mktemp("system")) as running:
        yield running


def wait_for(condition, timeout: float = 240.0, poll: float = 0.5):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(poll)
    raise AssertionError("timed out")


def test_a_batch_runs_end_to_end_and_settles_exactly(system: LocalSystem, tmp_path: Path) -> None:
    lines = [
        chat_line(f"req-{i}", f"question {i}: what is {i} plus {i}?", max_tokens=4 + i % 5)
        for i in range(REQUESTS)
    ]
    client = system.client()
    market = system.market
    user_before = market.token.balance_of(system.user.address)
    file = client.files.create(file=jsonl(lines), purpose="batch")
    batch = client.batches.create(input_file_id=file.id, endpoint="/v1/chat/completions", max_price=5 * UNIT)
    assert market.token.balance_of(system.user.address) == user_before - 5 * UNIT
    done = client.batches.wait(batch.id, poll_s=0.5, timeout_s=300)
    assert done.status == "completed", (done, (system.workdir / "worker.log").read_text()[-3000:])
    assert done.request_counts.total == done.request_counts.completed == REQUESTS
    output = [json.loads(row) for row in client.files.content(done.output_file_id).decode().splitlines()]
    assert sorted(line["custom_id"] for line in output) == sorted(f"req-{i}" for i in range(REQUESTS))
    task = market.tasks.get_task(batch.task_id)
    assert task.status == TaskStatus.RESULTS_COMMITTED
    assert "0x" + task.results_root.hex() == done.results_root
    usage = [line["response"]["body"]["usage"] for line in output]
    assert task.input_tokens == sum(u["prompt_tokens"] for u in usage)
    assert task.output_tokens == sum(u["completion_tokens"] for u in usage)
    payment = (task.input_tokens + task.output_tokens) * system.config.price_per_million_tokens // 10**6
    assert task.payment == payment
    system.advance_chain_time(system.config.challenge_window + 1)
    wait_for(lambda: market.tasks.get_task(batch.task_id).status == TaskStatus.FINALIZED)
    fee = payment * system.config.fee_bps // 10_000
    amounts = market.tasks.miner_amounts_of(batch.task_id)
    assert sum(amounts) == payment - fee
    assert market.escrow.balance_of(system.user.address) == 5 * UNIT - payment
    for miner, amount in zip(market.tasks.miners_of(batch.task_id), amounts, strict=True):
        assert market.escrow.balance_of(miner) == amount
