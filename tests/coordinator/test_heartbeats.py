"""POST /v1/miners/heartbeat: a live miner's beat is stored at once (one Redis command), a joined miner whose
live entry ran out becomes live again, a wallet that never joined is refused, and a beat naming units renews
only the leases that are the miner's (the others come back as lost)."""

from __future__ import annotations

import json

import httpx
from eth_account import Account
from eth_account.signers.local import LocalAccount
from redis import Redis

from coordinator.services.live import Heartbeat, LiveMembership
from tests.coordinator.conftest import ApiServer
from tests.coordinator.helpers import joined_miner


def beat(
    api: ApiServer, account: LocalAccount, latency_ms: float, units: list[int] | None = None
) -> httpx.Response:
    body = {"layer_latency_ms": latency_ms, "queue_depth": 2, "units": units or [], "rtt_ms": {}}
    return api.client(account).post("/v1/miners/heartbeat", json=body)


def test_beats_keep_joined_miners_live_and_refuse_strangers(chainless_api: ApiServer, redis_url: str) -> None:
    live = LiveMembership(Redis.from_url(redis_url))
    stranger, expired, beating = Account.create(), Account.create(), Account.create()

    refused = beat(chainless_api, stranger, 3.0)
    assert refused.status_code == 404 and refused.json()["error"]["code"] == "not_found"
    assert live.alive([stranger.address]) == {}

    joined_miner(
        chainless_api.app.state.settings.database_url, expired.address
    )  # its live entry ran out long ago
    assert beat(chainless_api, expired, 4.0).json() == {"status": "ok", "lost": []}
    assert live.alive([expired.address])[expired.address].layer_latency_ms == 4.0

    joined_miner(chainless_api.app.state.settings.database_url, beating.address)
    live.beat(beating.address, Heartbeat(1.0))
    assert beat(chainless_api, beating, 5.0).json() == {"status": "ok", "lost": []}
    stored = live.alive([beating.address])[beating.address]
    assert (stored.layer_latency_ms, stored.queue_depth) == (5.0, 2)
    assert 0 < live.redis.ttl(live.key(beating.address)) <= live.ttl_s


def test_a_beat_naming_units_not_its_own_gets_them_back_as_lost(
    chainless_api: ApiServer, redis_url: str
) -> None:
    head = Account.create()
    joined_miner(chainless_api.app.state.settings.database_url, head.address)
    LiveMembership(Redis.from_url(redis_url)).beat(head.address, Heartbeat(1.0))
    answer = beat(chainless_api, head, 1.0, units=[7, 9])
    assert answer.json() == {"status": "ok", "lost": [7, 9]}


def test_a_beat_with_a_time_no_planner_can_use_is_refused(chainless_api: ApiServer, redis_url: str) -> None:
    """NaN, infinity (Python's JSON reads both), negative times and times over a minute are refused naming
    the field; the miner's last good beat stands."""
    live = LiveMembership(Redis.from_url(redis_url))
    miner = Account.create()
    joined_miner(chainless_api.app.state.settings.database_url, miner.address)
    assert beat(chainless_api, miner, 2.0).json() == {"status": "ok", "lost": []}
    client = chainless_api.client(miner)
    good = {"layer_latency_ms": 2.0, "queue_depth": 0, "units": [], "rtt_ms": {}}
    for field, value in [
        ("layer_latency_ms", float("nan")),
        ("layer_latency_ms", float("inf")),
        ("layer_latency_ms", 0.0),
        ("layer_latency_ms", 60_001.0),
        ("rtt_ms", {"eu-west-1": float("nan")}),
        ("rtt_ms", {"eu-west-1": float("-inf")}),
        ("rtt_ms", {"eu-west-1": -1.0}),
        ("rtt_ms", {"x" * 65: 1.0}),
        ("relay_rtt_ms", float("inf")),
    ]:
        body = json.dumps(good | {field: value})  # NaN and Infinity as Python writes them
        refused = client.post(
            "/v1/miners/heartbeat", content=body, headers={"content-type": "application/json"}
        )
        assert refused.status_code == 400, (field, value, refused.text)
        assert refused.json()["error"]["param"].startswith(field), refused.json()
    assert live.alive([miner.address])[miner.address].layer_latency_ms == 2.0
