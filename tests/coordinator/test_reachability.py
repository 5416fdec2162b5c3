"""Reachability and relays on the coordinator's side: a join probes the registered endpoint only once its
checks pass and at most once per interval (no one can turn the coordinator into a port scanner); a miner
nobody can reach serves only alone; one behind a relay is planned with its inbound links priced as two hops,
its assignment names the relay, and links measured into it count the hop from the relay too."""

from __future__ import annotations

import math

import pytest
from eth_account.signers.local import LocalAccount

from client_sdk.chain.contracts import Market
from client_sdk.device import DeviceProfile
from client_sdk.protocol.model_identity import model_id_of
from coordinator.chain import CoordinatorChain
from coordinator.config import ServedModel
from coordinator.db.models import Miner
from coordinator.db.session import Database
from coordinator.scheduling.data import default_rtt_ms
from coordinator.scheduling.plan import Pipeline, Stage
from coordinator.services import miners
from coordinator.services.errors import Conflict, InvalidInput
from coordinator.services.live import Heartbeat, LiveMembership
from coordinator.services.miners import PROBE_INTERVAL_S, Joining, StageRelay
from coordinator.services.planning import (
    MAX_LIVE_MICROBATCHES,
    cluster_of,
    ensure_plan,
    in_flight,
    through_relays,
)
from coordinator.services.routing import measured_through_relays
from demo.lifecycle import MODEL
from miner.transport.security import LinkKeys
from tests.coordinator.test_task_aware_planning import HEAD, NOW, TAIL, miner
from tests.helpers import register_miner

RELAY = StageRelay("tcp://relay.example:5600", LinkKeys.generate().public.decode(), "eu-west-1")
DEVICE = DeviceProfile(gpu="cpu", memory_gb=8.0, tflops=1.0, mem_bandwidth_gb_s=10.0, layer_latency_ms=1.0)


class Probes:
    """The probe the coordinator would make, answering `reachable` and recording each endpoint asked."""

    def __init__(self, reachable: bool) -> None:
        self.reachable = reachable
        self.asked: list[str] = []

    def __call__(self, endpoint: str) -> bool:
        self.asked.append(endpoint)
        return self.reachable


def test_a_join_probes_the_registered_endpoint_at_most_once_per_interval(
    db: Database, live: LiveMembership, admin_market: Market, accounts: list[LocalAccount]
) -> None:
    account = accounts[6]
    register_miner(admin_market, account, 200 * 10**6)
    endpoint = admin_market.registry.profile_of(account.address).endpoint
    registry = CoordinatorChain(admin_market).registry
    joining = Joining(MODEL, endpoint, LinkKeys.generate().public.decode(), "us-east-1", DEVICE)
    probe = Probes(reachable=False)
    with db.session() as session:
        for at in (NOW, NOW + 1, NOW + PROBE_INTERVAL_S - 1):  # a node restarting in a loop
            joined = miners.join(
                session, registry, live, account.address, joining, model_id_of(MODEL), at, probe
            )
        assert probe.asked == [endpoint] and not joined.reachable and not joined.can_be_reached
        probe.reachable = True
        joined = miners.join(
            session,
            registry,
            live,
            account.address,
            joining,
            model_id_of(MODEL),
            NOW + PROBE_INTERVAL_S,
            probe,
        )
        assert (
            probe.asked == [endpoint, endpoint]
            and joined.reachable
            and joined.probed_at == NOW + PROBE_INTERVAL_S
        )


def test_a_join_that_fails_its_checks_probes_nothing(
    db: Database, live: LiveMembership, admin_market: Market, accounts: list[LocalAccount]
) -> None:
    """An unregistered caller, or a registered one naming another endpoint, cannot make the coordinator dial
    an address of its choosing."""
    registered, stranger = accounts[7], accounts[8]
    register_miner(admin_market, registered, 200 * 10**6)
    registry = CoordinatorChain(admin_market).registry
    probe = Probes(reachable=True)
    key = LinkKeys.generate().public.decode()
    with db.session() as session:
        for account, endpoint, code in (
            (stranger, "tcp://10.0.0.1:6379", "not_registered"),
            (registered, "tcp://10.0.0.1:6379", "endpoint_mismatch"),
        ):
            joining = Joining(MODEL, endpoint, key, "us-east-1", DEVICE)
            with pytest.raises(Conflict) as refused:
                miners.join(session, registry, live, account.address, joining, model_id_of(MODEL), NOW, probe)
            assert refused.value.code == code
    assert probe.asked == []


@pytest.mark.parametrize(
    ("relay", "param", "message"),
    [
        (
            StageRelay("relay.example:5600", RELAY.key, "eu-west-1"),
            "relay.endpoint",
            "relay: 'relay.example:5600' is not an endpoint a stage can dial: use tcp://HOST:PORT, e.g. "
            "tcp://203.0.113.7:5555",
        ),
        (
            StageRelay(RELAY.endpoint, "_" * 40, "eu-west-1"),
            "relay.key",
            "relay.key must be a 32-byte CURVE public key in Z85 (40 characters)",
        ),
        (
            StageRelay(RELAY.endpoint, RELAY.key, ""),
            "relay.region",
            "relay.region must name the relay's region",
        ),
    ],
)
def test_a_bad_relay_is_refused_naming_the_field(
    db: Database, live: LiveMembership, admin_market: Market, relay: StageRelay, param: str, message: str
) -> None:
    registry = CoordinatorChain(admin_market).registry
    joining = Joining(MODEL, "tcp://127.0.0.1:5555", RELAY.key, "us-east-1", DEVICE, relay)
    probe = Probes(reachable=False)
    with db.session() as session, pytest.raises(InvalidInput) as refused:
        miners.join(session, registry, live, "0x" + "9" * 40, joining, model_id_of(MODEL), NOW, probe)
    assert (str(refused.value), refused.value.param) == (message, param)
    assert probe.asked == []


def relayed(address: str, region: str = "us-east-1") -> Miner:
    row = miner(address, region)
    row.reachable = False
    row.relay_endpoint, row.relay_key, row.relay_region = RELAY.endpoint, RELAY.key, RELAY.region
    return row


def test_links_into_a_relayed_miner_cost_two_hops_and_links_out_one() -> None:
    table = {a: dict(row) for a, row in default_rtt_ms().items()}
    name = "us-east-1 via eu-west-1"
    priced = through_relays(table, {name: ("us-east-1", "eu-west-1")})
    assert priced["us-west-2"][name] == table["us-west-2"]["eu-west-1"] + table["eu-west-1"]["us-east-1"]
    assert priced["eu-west-1"][name] == table["eu-west-1"]["eu-west-1"] + table["eu-west-1"]["us-east-1"]
    assert priced[name]["us-west-2"] == table["us-east-1"]["us-west-2"]  # it dials out directly
    assert priced[name][name] == table["us-east-1"]["eu-west-1"] + table["eu-west-1"]["us-east-1"]
    cluster = cluster_of([miner(HEAD), relayed(TAIL)])
    assert cluster.one_way_ms(HEAD, TAIL) == priced["us-east-1"][name] / 2
    assert cluster.one_way_ms(TAIL, HEAD) == table["us-east-1"]["us-east-1"] / 2


def test_a_miner_nobody_can_reach_serves_only_alone(db: Database, served_model: ServedModel) -> None:
    """Two miners that each hold half the model: with one unreachable and no relay there is no pipeline;
    behind a relay, the pair is planned and the tail's assignment names the relay."""
    unreachable = miner(TAIL)
    unreachable.reachable = False
    with db.session() as session:
        live = [miner(HEAD), unreachable]
        session.add_all(live)
        assert ensure_plan(session, served_model, live, NOW) == []
        unreachable.relay_endpoint, unreachable.relay_key, unreachable.relay_region = (
            RELAY.endpoint,
            RELAY.key,
            RELAY.region,
        )
        session.flush()
        (pipeline,) = ensure_plan(session, served_model, [miner(HEAD), unreachable], NOW + 1)
        assert pipeline.miners == [HEAD, TAIL]
        assigned = miners.assignment(session, HEAD)
        assert assigned is not None
        stages: list[dict[str, object]] = assigned["stages"]  # type: ignore[assignment]
        assert [s["relay"] for s in stages] == [None, {"endpoint": RELAY.endpoint, "key": RELAY.key}]
        assert assigned["microbatches"] == pipeline.microbatches


def test_a_relayed_link_keeps_more_microbatches_in_flight() -> None:
    """DeServe's rule over the plan's stage times and links: the relay's extra hop (us-east-1 to eu-west-1
    and back) needs more microbatches to keep both stages busy than the same pipeline over direct links."""
    pipeline = Pipeline((Stage(HEAD, 0, 2), Stage(TAIL, 2, 4)))
    step_ms = {HEAD: 10.0, TAIL: 10.0}  # 20 ms per stage
    table = default_rtt_ms()
    direct = in_flight(pipeline, cluster_of([miner(HEAD), miner(TAIL)]), step_ms)
    through = in_flight(pipeline, cluster_of([miner(HEAD), relayed(TAIL)]), step_ms)
    within = table["us-east-1"]["us-east-1"] / 2
    via = (table["us-east-1"]["eu-west-1"] + table["eu-west-1"]["us-east-1"]) / 2
    assert direct == math.ceil((40 + 2 * within) / 20)
    assert through == min(MAX_LIVE_MICROBATCHES, math.ceil((40 + via + within) / 20)) > direct


def test_a_link_measured_into_a_relayed_miner_counts_the_relay_hop() -> None:
    beats = {
        HEAD: Heartbeat(1.0, rtt_ms={TAIL: 30.0}),  # the head measures as far as the relay
        TAIL: Heartbeat(1.0, rtt_ms={HEAD: 12.0}, relay_rtt_ms=8.0),  # the tail, its own hop to the relay
    }
    assert measured_through_relays(beats) == {HEAD: {TAIL: 38.0}, TAIL: {HEAD: 12.0}}
