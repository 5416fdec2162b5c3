"""Miners joining the coordinator: checked against their on-chain registration, recorded, then kept alive by
heartbeats; any change of the live set re-plans the model's pipelines."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy import select
from sqlalchemy.orm import Session

from client_sdk.chain.types import MinerProfile, Stake
from client_sdk.device import DeviceProfile
from client_sdk.protocol.endpoint import check_stage_endpoint
from client_sdk.protocol.link_keys import is_link_key
from client_sdk.protocol.model_identity import describe
from client_sdk.units import format_amount
from coordinator.db.models import Miner, PipelineRecord
from coordinator.services.dispatch import break_leases_of, pipelines_of
from coordinator.services.errors import Conflict, InvalidInput, NotFound
from coordinator.services.live import Heartbeat, LiveMembership


class Registry(Protocol):
    """The on-chain facts a join is checked against (client_sdk's GPURegistry binding)."""

    def is_registered(self, miner: str) -> bool: ...

    def profile_of(self, miner: str) -> MinerProfile: ...

    def stake_of(self, miner: str) -> Stake: ...

    def min_stake(self) -> int: ...


PROBE_INTERVAL_S = 10  # one reachability probe per miner per this many seconds, however often it joins


@dataclass(frozen=True)
class StageRelay:
    """The relay a node behind NAT takes its peers' messages through: where it listens, the CURVE key it
    proves there, and the region it is in (so links through it are priced as two hops)."""

    endpoint: str
    key: str
    region: str


@dataclass(frozen=True)
class Joining:
    """What a node says about itself when it joins."""

    model: str
    endpoint: str  # where its stage inbox listens
    link_key: str  # the public CURVE key (Z85) its stage links use
    region: str
    device: DeviceProfile
    relay: StageRelay | None = None


Probe = Callable[[str], bool]  # whether a TCP connection to the endpoint opens (I/O, given by the caller)


def join(
    session: Session,
    registry: Registry,
    live: LiveMembership,
    address: str,
    joining: Joining,
    model_hash: bytes,
    now: int,
    probe: Probe,
) -> Miner:
    """Records (or refreshes) a miner after checking it is registered on-chain for its model (by
    `model_hash`, the identity of the checkpoint served under the model's name) with enough free stake and
    that its link key is a key; the join counts as its first heartbeat. The join is signed by the miner's
    wallet, which binds the link key to its registered identity.

    Then `probe`s its registered endpoint (at most once per PROBE_INTERVAL_S and miner, and only once the
    checks passed: joins cannot make the coordinator dial an address at will) and records whether it was
    reachable; a miner neither reachable nor behind a relay is not planned into any pipeline."""
    model, device = joining.model, joining.device
    require_link_key(joining.link_key, "link_key")
    relay = joining.relay
    if relay is not None:
        _check_relay(relay)
    if not registry.is_registered(address):
        raise Conflict(f"{address} is not registered on-chain (run `miner register` first)", "not_registered")
    profile = registry.profile_of(address)
    if model_hash not in profile.model_ids:
        raise Conflict(
            f"{address} is not registered to serve {model!r} ({describe(model_hash)})", "model_not_registered"
        )
    if joining.endpoint != profile.endpoint:
        raise Conflict(
            f"{address} joined with the endpoint {joining.endpoint!r}, but its registered endpoint is "
            f"{profile.endpoint!r}, which its peers dial (`miner update --endpoint` changes it)",
            "endpoint_mismatch",
        )
    free, needed = registry.stake_of(address).free, registry.min_stake()
    if free < needed:
        raise Conflict(
            f"{address} has {format_amount(free)} free stake; at least {format_amount(needed)} is needed",
            "insufficient_stake",
        )
    if device.memory_gb <= 0 or device.layer_latency_ms <= 0 or device.tflops <= 0:
        raise InvalidInput("the device profile needs positive memory, TFLOPS and layer latency", "device")
    known = session.get(Miner, address)
    due = (
        known is None
        or known.endpoint != joining.endpoint
        or now - (known.probed_at or 0) >= PROBE_INTERVAL_S
    )
    miner = known or Miner(address=address, joined_at=now)
    miner.session_started_at = now
    if known is not None:  # a restart: the work its pipelines had in flight is gone
        break_leases_of(session, address, now)
    miner.model, miner.endpoint, miner.region = model, joining.endpoint, joining.region
    miner.link_key = joining.link_key
    if due:
        miner.reachable, miner.probed_at = probe(joining.endpoint), now
    miner.relay_endpoint = relay.endpoint if relay else None
    miner.relay_key = relay.key if relay else None
    miner.relay_region = relay.region if relay else None
    miner.gpu, miner.memory_gb, miner.tflops = device.gpu, device.memory_gb, device.tflops
    miner.mem_bandwidth_gb_s, miner.layer_latency_ms = device.mem_bandwidth_gb_s, device.layer_latency_ms
    session.add(miner)
    live.beat(address, Heartbeat(layer_latency_ms=device.layer_latency_ms))
    return miner


def require_link_key(value: str, param: str) -> None:
    if not is_link_key(value):
        raise InvalidInput(f"{param} must be a 32-byte CURVE public key in Z85 (40 characters)", param)


def _check_relay(relay: StageRelay) -> None:
    try:
        check_stage_endpoint(relay.endpoint)
    except ValueError as exc:
        raise InvalidInput(f"relay: {exc}", "relay.endpoint") from None
    require_link_key(relay.key, "relay.key")
    if not relay.region:
        raise InvalidInput("relay.region must name the relay's region", "relay.region")


def heartbeat(session: Session, live: LiveMembership, address: str, beat: Heartbeat) -> None:
    if session.get(Miner, address) is None:
        raise NotFound("miner", address)
    live.beat(address, beat)


@dataclass(frozen=True)
class RelayMembers:
    """The link keys a relay serves (see miner.transport.relay_admission)."""

    relayed: list[str]  # live miners joined through the relay: it takes their hellos
    senders: list[str]  # every live miner: it forwards their messages to the relayed ones


def live_link_keys(session: Session, live: LiveMembership) -> list[tuple[str, str | None]]:
    """(link key, key of the relay it joined through, or None) of every live miner that named a link key."""
    rows = session.execute(
        select(Miner.address, Miner.link_key, Miner.relay_key).where(Miner.link_key.is_not(None))
    ).all()
    alive = live.alive(row.address for row in rows)
    return [(row.link_key, row.relay_key) for row in rows if row.address in alive]


def relay_members(live_keys: list[tuple[str, str | None]], relay_key: str) -> RelayMembers:
    """The members of the relay whose key is `relay_key` (a link key), out of `live_link_keys`' list, each
    sorted."""
    return RelayMembers(
        relayed=sorted({link for link, relay in live_keys if relay == relay_key}),
        senders=sorted({link for link, _ in live_keys}),
    )


def live_miners(session: Session, live: LiveMembership, model: str) -> list[Miner]:
    """The miners of `model` whose heartbeat has not expired, in join order."""
    miners = session.scalars(
        select(Miner).where(Miner.model == model).order_by(Miner.joined_at, Miner.address)
    )
    rows = list(miners)
    alive = live.alive(m.address for m in rows)
    return [m for m in rows if m.address in alive]


def assignment(session: Session, address: str) -> dict[str, object] | None:
    """The miner's stage in the active plan: its pipeline, layers, and the stages around it."""
    if session.get(Miner, address) is None:
        raise NotFound("miner", address)
    for pipeline_id in pipelines_of(session, address, active_only=True)[:1]:
        pipeline = session.get(PipelineRecord, pipeline_id)
        assert pipeline is not None
        for position, stage in enumerate(pipeline.stages):
            if stage["miner"] == address:
                return {
                    "pipeline_id": pipeline.id,
                    "version": pipeline.version,
                    "model": pipeline.model,
                    "position": position,
                    "start": stage["start"],
                    "end": stage["end"],
                    "stages": _with_endpoints(session, pipeline.stages),
                    "microbatches": pipeline.microbatches or len(pipeline.stages),
                }
    return None


def _with_endpoints(session: Session, stages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each stage with the endpoint its miner joined with (where the previous stage sends), the public key
    of its links (what its peers' sockets authenticate it by) and, behind NAT, the relay its peers send
    through instead (null otherwise)."""
    addresses = [s["miner"] for s in stages]
    joined = {m.address: m for m in session.scalars(select(Miner).where(Miner.address.in_(addresses)))}
    return [
        {
            **stage,
            "endpoint": joined[stage["miner"]].endpoint,
            "link_key": joined[stage["miner"]].link_key,
            "relay": _relay_of(joined[stage["miner"]]),
        }
        for stage in stages
    ]


def _relay_of(miner: Miner) -> dict[str, str] | None:
    if miner.relay_endpoint is None or miner.relay_key is None:
        return None
    return {"endpoint": miner.relay_endpoint, "key": miner.relay_key}
