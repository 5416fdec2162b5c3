"""Every endpoint under /v1 needs a fresh wallet signature."""

from __future__ import annotations

from client_sdk.auth import sign_request
from tests.coordinator.conftest import ALICE, ApiServer


def test_unsigned_requests_get_401(api: ApiServer) -> None:
    client = api.client(ALICE)
    response = client.get("/v1/batches", auth=None)
    assert response.status_code == 401
    assert response.json()["error"]["type"] == "authentication_error"


def test_a_replayed_signature_is_refused(api: ApiServer) -> None:
    client = api.client(ALICE)
    header = sign_request(ALICE, "GET", "/v1/batches")
    first = client.get("/v1/batches", headers={"Authorization": header}, auth=None)
    again = client.get("/v1/batches", headers={"Authorization": header}, auth=None)
    assert first.status_code == 200
    assert again.status_code == 401 and again.json()["error"]["code"] == "replayed_signature"


def test_a_signature_for_another_path_is_refused(api: ApiServer) -> None:
    client = api.client(ALICE)
    header = sign_request(ALICE, "GET", "/v1/batches?limit=5")
    response = client.get("/v1/batches", headers={"Authorization": header}, auth=None)
    assert response.status_code == 401
    assert response.json()["error"]["message"] == "the request signature does not match the address"


def test_health_needs_no_signature(api: ApiServer) -> None:
    response = api.client(ALICE).get("/healthz", auth=None)
    assert response.json() == {"status": "ok", "database": "ok", "redis": "ok", "chain": "ok"}


def test_metrics_count_requests_by_route_and_batches_by_status(api: ApiServer) -> None:
    alice = api.client(ALICE)
    alice.get("/v1/batches/batch_x")
    text = alice.get("/metrics", auth=None).text
    assert (
        'batchmarket_http_requests_total{method="GET",route="/v1/batches/{batch_id}",status="404"} 1.0'
        in text
    )
    assert 'batchmarket_miners{state="joined"} 0.0' in text
