"""What a relay asks the coordinator (GET /v1/relays/members, read by the relay's CoordinatorMembers): the
live miners joined through that relay (whose hellos it takes) and every live miner (whose messages it
forwards); a miner whose heartbeat expired, or one joined through another relay, is not the relay's. A relay
key that is not a key is refused naming it."""

from __future__ import annotations

import re
import secrets

import httpx
import pytest

from coordinator.db.session import Database
from coordinator.services.live import Heartbeat, LiveMembership
from miner.node.relay_members import CoordinatorMembers
from miner.transport.relay_admission import MembersUnavailable, RelayMembers
from miner.transport.security import LinkKeys
from tests.coordinator.conftest import ApiServer
from tests.coordinator.test_task_aware_planning import miner

RELAY, OTHER_RELAY = (LinkKeys.generate().public.decode() for _ in range(2))


def test_a_relay_serves_the_live_miners_joined_through_it_and_forwards_from_every_live_one(
    db: Database, live: LiveMembership, api: ApiServer
) -> None:
    names = ("through_it", "direct", "through_another", "expired", "keyless")
    addresses = {name: "0x" + secrets.token_hex(20) for name in names}  # fresh in the shared Redis
    keys = {name: LinkKeys.generate().public.decode() for name in names}
    relay_of = {"through_it": RELAY, "through_another": OTHER_RELAY, "expired": RELAY}
    with db.session() as session:
        for name in names:
            row = miner(addresses[name])
            row.link_key = keys[name] if name != "keyless" else None
            row.relay_key = relay_of.get(name)
            session.add(row)
        session.commit()
    for name in names:
        if name != "expired":
            live.beat(addresses[name], Heartbeat(layer_latency_ms=1.0))
    fetch = CoordinatorMembers(api.url, RELAY.encode())
    try:
        got = fetch()
    finally:
        fetch.close()
    live_keys = {keys[name].encode() for name in ("through_it", "direct", "through_another")}
    assert got == RelayMembers(relayed=frozenset({keys["through_it"].encode()}), senders=frozenset(live_keys))


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("_" * 40, "key must be a 32-byte CURVE public key in Z85 (40 characters)"),
        ("short", "key: String should have at least 40 characters"),
    ],
)
def test_a_relay_key_that_is_not_a_key_is_refused_naming_it(api: ApiServer, key: str, message: str) -> None:
    answer = httpx.get(f"{api.url}/v1/relays/members", params={"key": key})
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert (error["message"], error["param"]) == (message, "key")
    fetch = CoordinatorMembers(api.url, key.encode())
    try:
        with pytest.raises(MembersUnavailable, match=re.escape(f"answered HTTP 400: {message}")):
            fetch()
    finally:
        fetch.close()
