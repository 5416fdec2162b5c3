"""/readyz names what keeps the coordinator from working, one check at a time, with a 503: an RPC that does
not answer, or one on another chain than the deployment's; /livez still answers while the process runs."""

from __future__ import annotations

import dataclasses

from web3 import HTTPProvider, Web3

from client_sdk.chain.anvil import free_port
from client_sdk.chain.contracts import Market
from client_sdk.chain.deployment import Deployment
from coordinator.chain import CoordinatorChain
from coordinator.config import Settings
from tests.coordinator.conftest import ALICE, ApiServer


def readiness(settings: Settings, market: Market) -> tuple[int, dict[str, str]]:
    with ApiServer(settings, CoordinatorChain(market)) as api:
        client = api.client(ALICE)
        assert client.get("/livez", auth=None).json() == {"status": "ok"}
        answer = client.get("/readyz", auth=None)
        return answer.status_code, answer.json()


def test_an_rpc_that_does_not_answer_is_named(settings: Settings, deployment: Deployment) -> None:
    dead = Web3(HTTPProvider(f"http://127.0.0.1:{free_port()}", request_kwargs={"timeout": 2}))
    status, body = readiness(settings, Market(dead, deployment))
    assert status == 503
    assert body == {
        "status": "degraded",
        "database": "ok",
        "redis": "ok",
        "chain": "error: the RPC does not answer (ConnectionError)",
    }


def test_an_rpc_on_another_chain_is_named(settings: Settings, admin_market: Market) -> None:
    elsewhere = dataclasses.replace(admin_market.deployment, chain_id=1)
    status, body = readiness(settings, Market(admin_market.w3, elsewhere))
    assert status == 503
    chain_id = admin_market.w3.eth.chain_id
    assert body["chain"] == f"wrong chain: the RPC is on chain {chain_id}, the deployment on 1"


def test_a_ready_coordinator(settings: Settings, admin_market: Market) -> None:
    assert readiness(settings, admin_market) == (
        200,
        {"status": "ok", "database": "ok", "redis": "ok", "chain": "ok"},
    )
