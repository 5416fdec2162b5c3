"""The real openai-python client as a drop-in: only `base_url` and a wallet-signing httpx client (the SDK's
`WalletSigner`) change. Files are uploaded, listed, read and deleted; a batch is created with the standard
`metadata` carrying the on-chain task the SDK funded for the file (no `extra_body`), retrieved until it
completes with its usage filled, listed, and its output downloaded; a batch cancelled through openai-python
before any miner started refunds the whole escrow on-chain at once; conflicts answer 400, which openai-python
does not retry. The SDK lists and deletes files and reports usage too. Two API processes serve this market
(uvicorn workers on one port, as `coordinator serve --workers 2` runs them): every call lands on either, and
a batch still runs every line exactly once."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from client_sdk.http import WalletSigner
from client_sdk.protocol.task import TaskStatus
from demo.system import UNIT, LocalSystem, SystemConfig
from tests.coordinator.helpers import chat_line, jsonl
from tests.e2e.conftest import wait_for

MAX_PRICE = 5 * UNIT
ENDPOINT = "/v1/chat/completions"


@pytest.fixture(scope="module")
def system(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalSystem]:
    with LocalSystem(tmp_path_factory.mktemp("system"), SystemConfig(api_workers=2)) as running:
        yield running


def api_processes(system: LocalSystem) -> list[int]:
    """The pids of the API's HTTP worker processes (the children of its supervisor)."""
    pid = system.processes["api"].pid
    return [
        int(c)
        for task in Path(f"/proc/{pid}/task").iterdir()
        for c in (task / "children").read_text().split()
    ]


@pytest.fixture(scope="module")
def oai(system: LocalSystem) -> Iterator[openai.OpenAI]:
    http = httpx.Client(auth=WalletSigner(system.user), timeout=60)
    # no retries: a request answered 409 or 5xx would otherwise be sent again, hiding the first answer
    client = openai.OpenAI(base_url=f"{system.api_url}/v1", api_key="signed-by-wallet", http_client=http)
    yield client.with_options(max_retries=0)
    http.close()


def upload(oai: openai.OpenAI, tag: str, count: int) -> str:
    data = jsonl([chat_line(f"{tag}-{i}", f"count to {i}", max_tokens=8) for i in range(count)])
    return oai.files.create(file=(f"{tag}.jsonl", data), purpose="batch").id


def fund(system: LocalSystem, file_id: str) -> int:
    return system.client().batches.fund_task(input_file_id=file_id, endpoint=ENDPOINT, max_price=MAX_PRICE)


def create(oai: openai.OpenAI, file_id: str, task_id: int) -> openai.types.Batch:
    """openai-python's own call, the task named in the standard metadata field."""
    return oai.batches.create(
        input_file_id=file_id, endpoint=ENDPOINT, completion_window="24h", metadata={"task_id": str(task_id)}
    )


def test_a_batch_cancelled_before_any_miner_started_refunds_its_escrow_at_once(
    system: LocalSystem, oai: openai.OpenAI
) -> None:
    market = system.market
    for index in range(len(system.miner_accounts)):  # no miner: the batch cannot start
        system.stop(f"miner{index}")
    try:
        file_id = upload(oai, "cancel", 3)
        task_id = fund(system, file_id)
        before = market.escrow.balance_of(system.user.address)
        batch = create(oai, file_id, task_id)
        assert oai.batches.cancel(batch.id).status == "cancelling"
        wait_for(lambda: market.tasks.get_task(task_id).status == TaskStatus.CANCELLED, timeout=60)
        assert oai.batches.retrieve(batch.id).status == "cancelled"
        assert market.escrow.balance_of(system.user.address) == before + MAX_PRICE
        assert market.escrow.escrow_of(task_id) == 0
        with pytest.raises(openai.BadRequestError) as refused:
            oai.batches.cancel(batch.id)
        assert refused.value.status_code == 400
        assert refused.value.body["code"] == "invalid_state"  # type: ignore[index]
    finally:
        for index in range(len(system.miner_accounts)):
            system.start_miner(index)
        system.wait_for_miners(range(len(system.miner_accounts)))


def test_files_and_a_batch_through_openai_python(system: LocalSystem, oai: openai.OpenAI) -> None:
    file_id = upload(oai, "oai", 4)
    assert file_id in [f.id for f in oai.files.list()]
    assert oai.files.retrieve(file_id).filename == "oai.jsonl"
    task_id = fund(system, file_id)
    batch = create(oai, file_id, task_id)
    assert batch.status == "validating"
    with pytest.raises(openai.BadRequestError) as reused:  # one task backs one batch
        create(oai, file_id, task_id)
    assert reused.value.body["code"] == "task_in_use"  # type: ignore[index]

    done = wait_for(lambda: (b := oai.batches.retrieve(batch.id)).status == "completed" and b, timeout=240)
    task = system.market.tasks.get_task(task_id)
    assert done.usage is not None
    assert (done.usage.input_tokens, done.usage.output_tokens) == (task.input_tokens, task.output_tokens)
    assert done.usage.total_tokens == task.input_tokens + task.output_tokens > 0
    assert done.request_counts is not None and done.request_counts.completed == 4
    assert batch.id in [b.id for b in oai.batches.list()]
    assert done.output_file_id is not None
    lines = [json.loads(row) for row in oai.files.content(done.output_file_id).text.splitlines()]
    assert sorted(line["custom_id"] for line in lines) == [f"oai-{i}" for i in range(4)]

    with pytest.raises(openai.BadRequestError) as in_use:
        oai.files.delete(file_id)
    assert in_use.value.body["code"] == "file_in_use"  # type: ignore[index]
    spare = upload(oai, "spare", 1)
    assert oai.files.delete(spare).deleted
    assert spare not in [f.id for f in oai.files.list()]
    with pytest.raises(openai.NotFoundError):
        oai.files.retrieve(spare)


def test_the_sdk_lists_and_deletes_files_and_reports_usage(system: LocalSystem) -> None:
    sdk = system.client()
    listed = sdk.files.list(purpose="batch_output").data
    assert listed and all(f.purpose == "batch_output" for f in listed)
    done = [b for b in sdk.batches.list().data if b.status == "completed"]
    assert done and all(b.usage is not None and b.usage.total_tokens > 0 for b in done)
    spare = sdk.files.create(file=jsonl([chat_line("sdk-0", "hello")]))
    sdk.files.delete(spare.id)
    assert spare.id not in [f.id for f in sdk.files.list(limit=100).data]


def test_two_api_processes_serve_a_batch_with_every_line_once(system: LocalSystem) -> None:
    """Nodes wait for news on one process while the worker's wakes reach both; claims, results and
    signatures land on either."""
    workers = api_processes(system)
    assert len(workers) == 2
    sdk = system.client()
    lines = [chat_line(f"two-{i}", f"what is {i} times {i}?", max_tokens=6) for i in range(32)]
    file = sdk.files.create(file=jsonl(lines), purpose="batch")
    batch = sdk.batches.create(input_file_id=file.id, endpoint=ENDPOINT, max_price=MAX_PRICE)
    done = sdk.batches.wait(batch.id, poll_s=0.5, timeout_s=240)
    assert done.status == "completed" and done.request_counts.completed == 32
    results = sdk.batches.results(batch.id)  # every line checked against the chain
    assert results.errors == []
    assert sorted(v.line["custom_id"] for v in results.output) == sorted(f"two-{i}" for i in range(32))
    assert api_processes(system) == workers  # neither restarted
