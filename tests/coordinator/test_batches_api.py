"""/v1/batches: OpenAI's fields and statuses, pagination, cancel, and nobody else's batches."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from eth_account.signers.local import LocalAccount
from typer.testing import CliRunner

from client_sdk.chain.anvil import Anvil
from client_sdk.chain.contracts import Market
from client_sdk.cli.market import app as market_app
from client_sdk.client import Client
from client_sdk.encoding import hex_bytes
from client_sdk.errors import UserError
from client_sdk.protocol.task import TaskStatus
from coordinator.db.models import Batch
from demo.lifecycle import DemoConfig
from tests.coordinator.conftest import ALICE, BOB, ApiServer
from tests.coordinator.helpers import batch_file, funded_task

OPENAI_BATCH_FIELDS = {
    "id",
    "object",
    "endpoint",
    "errors",
    "input_file_id",
    "completion_window",
    "status",
    "output_file_id",
    "error_file_id",
    "created_at",
    "in_progress_at",
    "expires_at",
    "finalizing_at",
    "completed_at",
    "failed_at",
    "expired_at",
    "cancelling_at",
    "cancelled_at",
    "request_counts",
    "metadata",
    "usage",
}


def owned_task(
    api: ApiServer,
    market: Market,
    chain: Anvil,
    owner: LocalAccount,
    max_price: int = DemoConfig.max_price,
    window: str = "24h",
) -> int:
    """A funded on-chain task of `owner` (given gas money) for the file `new_batch` uploads: its input root,
    line count and model, at the demo's prices, for chat completions over `window`."""
    chain.w3.provider.make_request("anvil_setBalance", [owner.address, hex(10**20)])  # type: ignore[arg-type]
    upload = {"file": ("in.jsonl", batch_file(3))}
    file = api.client(owner).post("/v1/files", files=upload, data={"purpose": "batch"}).json()
    return funded_task(
        market,
        owner,
        hex_bytes(file["model_hash"]),
        hex_bytes(file["input_root"]),
        file["request_count"],
        max_price,
        DemoConfig.price_per_million_tokens,
        window,
    )


def new_batch(client: httpx.Client, task: int, **extra: object) -> httpx.Response:
    file = client.post("/v1/files", files={"file": ("in.jsonl", batch_file(3))}, data={"purpose": "batch"})
    body = {
        "input_file_id": file.json()["id"],
        "endpoint": "/v1/chat/completions",
        "task_id": task,
        **extra,
    }
    return client.post("/v1/batches", json=body)


def test_a_new_batch_is_validating_with_openai_fields(
    api: ApiServer, admin_market: Market, chain: Anvil
) -> None:
    alice = api.client(ALICE)
    day_long = owned_task(api, admin_market, chain, ALICE)
    other_window = new_batch(alice, day_long, completion_window="48h")
    assert other_window.status_code == 400
    assert other_window.json()["error"] == {
        "message": f"task {day_long} does not back this batch: its params differs from this batch's (the "
        "task must name this file's input root, line count and model, and this batch's endpoint and "
        "completion_window; the SDK's batches.fund_task makes such a task)",
        "type": "invalid_request_error",
        "param": "completion_window",
        "code": "task_mismatch",
    }
    task = owned_task(api, admin_market, chain, ALICE, window="48h")
    response = new_batch(alice, task, metadata={"project": "x"}, completion_window="48h")
    assert response.status_code == 200, response.text
    batch = response.json()
    assert set(batch) >= OPENAI_BATCH_FIELDS
    assert (batch["object"], batch["status"], batch["task_id"]) == ("batch", "validating", task)
    assert batch["request_counts"] == {"total": 3, "completed": 0, "failed": 0}
    assert batch["expires_at"] - batch["created_at"] == 48 * 3600
    assert batch["metadata"] == {"project": "x"}
    assert batch["usage"] == {
        "input_tokens": 0,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 0,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 0,
    }
    assert alice.get(f"/v1/batches/{batch['id']}").json() == batch


def test_the_task_id_can_come_in_metadata_as_openai_python_sends_it(
    api: ApiServer, admin_market: Market, chain: Anvil
) -> None:
    alice = api.client(ALICE)
    task = owned_task(api, admin_market, chain, ALICE)
    response = new_batch(alice, task, task_id=None, metadata={"task_id": str(task)})
    assert response.status_code == 200, response.text
    assert response.json()["task_id"] == task


@pytest.mark.parametrize(
    ("extra", "status", "message"),
    [
        ({"endpoint": "/v1/completions"}, 400, "the file's requests are for /v1/chat/completions"),
        ({"completion_window": "1d"}, 400, "completion_window must be whole hours from 1h to 168h"),
        ({"completion_window": "169h"}, 400, "completion_window must be whole hours"),
        ({"input_file_id": "file-nope"}, 404, "no file with id 'file-nope'"),
        ({"metadata": {str(i): "v" for i in range(17)}}, 400, "metadata holds at most 16 pairs"),
        ({"task_id": -1}, 400, "task_id: Input should be greater than or equal to 1"),
        ({"task_id": 10**6}, 400, "task 1000000 does not exist on-chain"),
        ({"task_id": None}, 400, "name the on-chain task you funded for this file: task_id, or metadata"),
        ({"task_id": None, "metadata": {"task_id": "0x1"}}, 400, "metadata.task_id must be a decimal"),
        ({"task_id": None, "metadata": {"task_id": "0"}}, 400, "metadata.task_id must be a decimal"),
        ({"task_id": None, "metadata": {"task_id": "9" * 30}}, 400, "metadata.task_id must be a decimal"),
        ({"metadata": {"task_id": "999999"}}, 400, "task_id "),
    ],
)
def test_bad_batch_requests_are_refused(
    api: ApiServer, admin_market: Market, chain: Anvil, extra: dict[str, object], status: int, message: str
) -> None:
    response = new_batch(api.client(ALICE), owned_task(api, admin_market, chain, ALICE), **extra)
    assert response.status_code == status
    assert response.json()["error"]["message"].startswith(message)


def test_one_task_backs_one_batch(api: ApiServer, admin_market: Market, chain: Anvil) -> None:
    alice = api.client(ALICE)
    task = owned_task(api, admin_market, chain, ALICE)
    assert new_batch(alice, task).status_code == 200
    again = new_batch(alice, task)
    assert again.status_code == 400 and again.json()["error"]["message"] == f"task {task} already has a batch"


def test_a_failed_batch_frees_its_task_for_the_owner(
    api: ApiServer, admin_market: Market, chain: Anvil
) -> None:
    """A failed batch no longer holds its task: the owner's second registration of it is taken, and that
    batch holds it. (A batch the worker fails also gives an open task up on-chain, refunding the owner at
    once: tests/coordinator/test_failed_batch_refund.py.)"""
    alice = api.client(ALICE)
    task = owned_task(api, admin_market, chain, ALICE)
    first = new_batch(alice, task).json()
    with api.app.state.database.session() as session:
        session.get(Batch, first["id"]).status = "failed"
    second = new_batch(alice, task)
    assert second.status_code == 200 and second.json()["id"] != first["id"]
    third = new_batch(alice, task)
    assert third.status_code == 400 and third.json()["error"]["code"] == "task_in_use"
    assert alice.get(f"/v1/batches/{first['id']}").json()["status"] == "failed"


def test_no_one_registers_another_wallets_task(api: ApiServer, admin_market: Market, chain: Anvil) -> None:
    """Task squatting: Bob registering Alice's fresh task is refused before anything is stored, so Alice's own
    registration goes through."""
    task = owned_task(api, admin_market, chain, ALICE)
    squat = new_batch(api.client(BOB), task)
    assert squat.status_code == 400
    assert squat.json()["error"] == {
        "message": f"task {task} belongs to {ALICE.address}, not to {BOB.address}: register your own task",
        "type": "invalid_request_error",
        "param": "task_id",
        "code": "task_not_yours",
    }
    assert api.client(BOB).get("/v1/batches").json()["data"] == []
    assert new_batch(api.client(ALICE), task).status_code == 200


@pytest.mark.parametrize("short_by", ["one base unit", "all but one base unit"])
def test_a_task_whose_max_price_cannot_cover_the_file_is_refused(
    api: ApiServer, admin_market: Market, chain: Anvil, short_by: str
) -> None:
    """Underfunded work: the payment is capped at the max price, so a max price below what the file's prompts
    and every line's max_tokens cost at the task's prices would have miners serve unpaid work. Refused at
    creation, before anything is stored; a max price that covers it exactly is taken."""
    alice = api.client(ALICE)
    file = alice.post(
        "/v1/files", files={"file": ("in.jsonl", batch_file(3))}, data={"purpose": "batch"}
    ).json()
    price = DemoConfig.price_per_million_tokens
    worst = (file["input_tokens"] + file["max_output_tokens"]) * price // 10**6
    assert file["max_output_tokens"] > 0 and worst > 1
    max_price = worst - 1 if short_by == "one base unit" else 1
    task = owned_task(api, admin_market, chain, ALICE, max_price=max_price)
    body = {"input_file_id": file["id"], "endpoint": "/v1/chat/completions", "task_id": task}
    refused = alice.post("/v1/batches", json=body)
    assert refused.status_code == 400
    shown = [f"{a // 10**6}.{a % 10**6:06d}" for a in (max_price, worst)]
    assert refused.json()["error"] == {
        "message": f"task {task} escrows a max price of {shown[0]}, but this file can cost up to {shown[1]} "
        f"({file['input_tokens']} input tokens and up to {file['max_output_tokens']} output tokens at the "
        f"task's prices): fund a task with a max price of at least {shown[1]}",
        "type": "invalid_request_error",
        "param": "task_id",
        "code": "underfunded",
    }
    assert alice.get("/v1/batches").json()["data"] == []
    covered = owned_task(api, admin_market, chain, ALICE, max_price=worst)
    assert alice.post("/v1/batches", json=body | {"task_id": covered}).status_code == 200


def test_list_pages_newest_first(api: ApiServer, admin_market: Market, chain: Anvil) -> None:
    alice = api.client(ALICE)
    ids = [new_batch(alice, owned_task(api, admin_market, chain, ALICE)).json()["id"] for _ in range(5)]
    new_batch(api.client(BOB), owned_task(api, admin_market, chain, BOB))
    seen: list[str] = []
    after = None
    while True:
        params: dict[str, str | int] = {"limit": 2} | ({"after": after} if after else {})
        page = alice.get("/v1/batches", params=params).json()
        seen += [b["id"] for b in page["data"]]
        if not page["has_more"]:
            break
        after = page["last_id"]
    assert sorted(seen) == sorted(ids) and len(seen) == 5
    created = [alice.get(f"/v1/batches/{i}").json()["created_at"] for i in seen]
    assert created == sorted(created, reverse=True)


def test_cancel_moves_to_cancelling_once(api: ApiServer, admin_market: Market, chain: Anvil) -> None:
    alice = api.client(ALICE)
    batch = new_batch(alice, owned_task(api, admin_market, chain, ALICE)).json()
    first = alice.post(f"/v1/batches/{batch['id']}/cancel").json()
    again = alice.post(f"/v1/batches/{batch['id']}/cancel").json()
    assert first["status"] == again["status"] == "cancelling"
    assert first["cancelling_at"] == again["cancelling_at"] is not None


def test_another_wallet_cannot_see_or_cancel_a_batch(
    api: ApiServer, admin_market: Market, chain: Anvil
) -> None:
    batch = new_batch(api.client(ALICE), owned_task(api, admin_market, chain, ALICE)).json()
    bob = api.client(BOB)
    for response in (bob.get(f"/v1/batches/{batch['id']}"), bob.post(f"/v1/batches/{batch['id']}/cancel")):
        assert response.status_code == 404
        assert response.json()["error"]["message"] == f"no batch with id {batch['id']!r}"
    assert bob.get("/v1/batches").json()["data"] == []
    assert api.client(ALICE).get(f"/v1/batches/{batch['id']}").json()["status"] == "validating"


def test_cancelling_before_assignment_refunds_the_whole_escrow(
    api: ApiServer, admin_market: Market, chain: Anvil, deployment_file: Path
) -> None:
    """Through the SDK: the batch stops and, no miner having been assigned, the task is cancelled on-chain, so
    the owner's escrow balance holds the whole max price at once (to the unit)."""
    chain.w3.provider.make_request("anvil_setBalance", [ALICE.address, hex(10**20)])  # type: ignore[arg-type]
    max_price = 7_654_321
    admin_market.token.mint(ALICE.address, max_price)
    client = Client(api.url, key=ALICE, rpc_url=chain.rpc_url, deployment=deployment_file)
    file = client.files.create(file=batch_file(3))
    with pytest.raises(UserError) as short:  # amounts in tokens, not base units
        client.batches.create(input_file_id=file.id, endpoint="/v1/chat/completions", max_price=max_price + 1)
    assert str(short.value) == (
        f"the wallet {ALICE.address} holds 7.654321, less than the max price 7.654322"
    )
    batch = client.batches.create(input_file_id=file.id, endpoint="/v1/chat/completions", max_price=max_price)
    assert admin_market.token.balance_of(ALICE.address) == 0
    cancelled = client.batches.cancel(batch.id)
    assert cancelled.status == "cancelling"
    assert admin_market.tasks.get_task(batch.task_id).status == TaskStatus.CANCELLED
    assert admin_market.escrow.balance_of(ALICE.address) == max_price
    client.close()


def test_the_sdk_refuses_an_underfunded_batch_before_any_money_moves(
    api: ApiServer, admin_market: Market, chain: Anvil, deployment_file: Path
) -> None:
    """`batches.create` (and so `market submit`) with a max price below what the file can cost at the
    coordinator's prices: one line naming the numbers, no transaction (no task, no allowance, the balance
    whole)."""
    chain.w3.provider.make_request("anvil_setBalance", [ALICE.address, hex(10**20)])  # type: ignore[arg-type]
    admin_market.token.mint(ALICE.address, 10**6)
    client = Client(api.url, key=ALICE, rpc_url=chain.rpc_url, deployment=deployment_file)
    file = client.files.create(file=batch_file(3))
    assert file.input_tokens is not None and file.max_output_tokens is not None
    tasks_before, held = admin_market.tasks.task_count(), admin_market.token.balance_of(ALICE.address)
    price = client.batches.asking_prices()
    worst = price.price(file.input_tokens, file.max_output_tokens)
    with pytest.raises(UserError) as refused:
        client.batches.create(input_file_id=file.id, endpoint="/v1/chat/completions", max_price=worst - 1)
    shown = [f"{a // 10**6}.{a % 10**6:06d}" for a in (worst - 1, worst, price.input_per_million)]
    assert str(refused.value) == (
        f"the max price {shown[0]} is less than this file can cost: up to {shown[1]} for {file.input_tokens} "
        f"input tokens and up to {file.max_output_tokens} output tokens (the lines' max_tokens) at "
        f"{shown[2]} and {shown[2]} per million; raise the max price to at least {shown[1]} or lower the "
        "lines' max_tokens"
    )
    assert admin_market.tasks.task_count() == tasks_before
    assert admin_market.token.balance_of(ALICE.address) == held
    assert admin_market.token.allowance(ALICE.address, admin_market.escrow.address) == 0
    client.close()


def test_a_batchs_input_file_cannot_be_deleted(api: ApiServer, admin_market: Market, chain: Anvil) -> None:
    """Its lines are what the task's input root commits to and what a dispute proves."""
    alice = api.client(ALICE)
    batch = new_batch(alice, owned_task(api, admin_market, chain, ALICE)).json()
    refused = alice.delete(f"/v1/files/{batch['input_file_id']}")
    assert refused.status_code == 400
    assert refused.json()["error"] == {
        "message": f"file {batch['input_file_id']} is the input of batch {batch['id']}",
        "type": "invalid_request_error",
        "param": "file_id",
        "code": "file_in_use",
    }


def test_market_status_says_why_a_batch_failed(
    api: ApiServer, admin_market: Market, chain: Anvil, deployment_file: Path
) -> None:
    alice = api.client(ALICE)
    batch = new_batch(alice, owned_task(api, admin_market, chain, ALICE)).json()
    with api.app.state.database.session() as session:
        stored = session.get(Batch, batch["id"])
        stored.status = "failed"
        reason = "task 9: the input root does not match the batch"
        stored.errors = [{"code": "invalid_task", "message": reason, "param": None, "line": None}]
    env = {
        "BATCHMARKET_COORDINATOR_URL": api.url,
        "BATCHMARKET_RPC_URL": chain.rpc_url,
        "BATCHMARKET_DEPLOYMENT": str(deployment_file),
        "BATCHMARKET_PRIVATE_KEY": ALICE.key.to_0x_hex(),
    }
    shown = CliRunner().invoke(market_app, ["status", batch["id"]], env=env, terminal_width=200)
    assert shown.exit_code == 0, shown.output
    [line] = [row for row in shown.stdout.splitlines() if "failed because" in row]
    assert "task 9: the input root does not match the batch" in line
    assert "tokens" in shown.stdout and "0 in, 0 out" in shown.stdout
