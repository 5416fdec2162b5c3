"""Live membership in Redis: each miner's latest heartbeat (per-layer latency, RTTs to peers, queue depth),
kept with an expiry so that a miner that goes silent drops out by itself."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field

from redis import Redis

HEARTBEAT_TTL_S = 30
# a beat reads the miner's row at least this often (a live entry is no proof of a row: a database restored
# under the same Redis, a join whose transaction failed after its first beat)
JOINED_MARK_S = 600


@dataclass(frozen=True)
class Heartbeat:
    layer_latency_ms: float
    queue_depth: int = 0
    rtt_ms: dict[str, float] = field(default_factory=dict)
    relay_rtt_ms: float | None = None  # behind a relay: the round trip to it


class LiveMembership:
    def __init__(self, redis: Redis, ttl_s: int = HEARTBEAT_TTL_S) -> None:
        self.redis = redis
        self.ttl_s = ttl_s

    @staticmethod
    def key(address: str) -> str:
        """The Redis key of a miner's latest heartbeat."""
        return f"miner:live:{address.lower()}"

    @staticmethod
    def joined_key(address: str) -> str:
        """The Redis key that says a miner's row was read (or committed) in the last JOINED_MARK_S."""
        return f"miner:joined:{address.lower()}"

    def mark_joined(self, address: str) -> None:
        self.redis.set(self.joined_key(address), b"1", ex=JOINED_MARK_S)

    @staticmethod
    def encode(heartbeat: Heartbeat) -> str:
        return json.dumps(asdict(heartbeat))

    def beat(self, address: str, heartbeat: Heartbeat) -> None:
        self.redis.set(self.key(address), self.encode(heartbeat), ex=self.ttl_s)

    def forget(self, address: str) -> None:
        self.redis.delete(self.key(address))

    def alive(self, addresses: Iterable[str]) -> dict[str, Heartbeat]:
        """The latest heartbeat of each given miner still alive."""
        ordered = list(addresses)
        if not ordered:
            return {}
        raw = self.redis.mget([self.key(a) for a in ordered])
        return {a: Heartbeat(**json.loads(v)) for a, v in zip(ordered, raw, strict=True) if v is not None}
