"""/v1/batches: OpenAI's fields and statuses, pagination, cancel, and nobody else's batches."""

from __future__ import annotations

import httpx
import pytest

from tests.coordinator.conftest import ALICE, BOB, ApiServer
from tests.coordinator.helpers import batch_file

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
}


def new_batch(client: httpx.Client, task: int, **extra: object) -> httpx.Response:
    file = client.post("/v1/files", files={"file": ("in.jsonl", batch_file(3))}, data={"purpose": "batch"})
    body = {
        "input_file_id": file.json()["id"],
        "endpoint": "/v1/chat/completions",
        "task_id": task,
        **extra,
    }
    return client.post("/v1/batches", json=body)


def test_a_new_batch_is_validating_with_openai_fields(api: ApiServer) -> None:
    alice = api.client(ALICE)
    response = new_batch(alice, 7, metadata={"project": "x"}, completion_window="48h")
    assert response.status_code == 200, response.text
    batch = response.json()
    assert set(batch) >= OPENAI_BATCH_FIELDS
    assert (batch["object"], batch["status"], batch["task_id"]) == ("batch", "validating", 7)
    assert batch["request_counts"] == {"total": 3, "completed": 0, "failed": 0}
    assert batch["expires_at"] - batch["created_at"] == 48 * 3600
    assert batch["metadata"] == {"project": "x"}
    assert alice.get(f"/v1/batches/{batch['id']}").json() == batch


@pytest.mark.parametrize(
    ("extra", "status", "message"),
    [
        ({"endpoint": "/v1/completions"}, 400, "the file's requests are for /v1/chat/completions"),
        ({"completion_window": "1d"}, 400, "completion_window must be whole hours from 1h to 168h"),
        ({"completion_window": "169h"}, 400, "completion_window must be whole hours"),
        ({"input_file_id": "file-nope"}, 404, "no file with id 'file-nope'"),
        ({"metadata": {str(i): "v" for i in range(17)}}, 400, "metadata holds at most 16 pairs"),
        ({"task_id": -1}, 400, "task_id must be the id of your on-chain task"),
    ],
)
def test_bad_batch_requests_are_refused(
    api: ApiServer, extra: dict[str, object], status: int, message: str
) -> None:
    response = new_batch(api.client(ALICE), 1, **extra)
    assert response.status_code == status
    assert response.json()["error"]["message"].startswith(message)


def test_one_task_backs_one_batch(api: ApiServer) -> None:
    alice = api.client(ALICE)
    assert new_batch(alice, 3).status_code == 200
    again = new_batch(alice, 3)
    assert again.status_code == 409 and again.json()["error"]["message"] == "task 3 already has a batch"


def test_list_pages_newest_first(api: ApiServer) -> None:
    alice = api.client(ALICE)
    ids = [new_batch(alice, task).json()["id"] for task in range(5)]
    new_batch(api.client(BOB), 99)
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


def test_cancel_moves_to_cancelling_once(api: ApiServer) -> None:
    alice = api.client(ALICE)
    batch = new_batch(alice, 1).json()
    first = alice.post(f"/v1/batches/{batch['id']}/cancel").json()
    again = alice.post(f"/v1/batches/{batch['id']}/cancel").json()
    assert first["status"] == again["status"] == "cancelling"
    assert first["cancelling_at"] == again["cancelling_at"] is not None


def test_another_wallet_cannot_see_or_cancel_a_batch(api: ApiServer) -> None:
    batch = new_batch(api.client(ALICE), 1).json()
    bob = api.client(BOB)
    for response in (bob.get(f"/v1/batches/{batch['id']}"), bob.post(f"/v1/batches/{batch['id']}/cancel")):
        assert response.status_code == 404
        assert response.json()["error"]["message"] == f"no batch with id {batch['id']!r}"
    assert bob.get("/v1/batches").json()["data"] == []
    assert api.client(ALICE).get(f"/v1/batches/{batch['id']}").json()["status"] == "validating"
