"""GET /v1/miners/wake: a node's long poll for news (coordinator.wakes rings; this answers).

Each API process holds one subscription to the wake channel, whatever the number of waiting nodes; a waiting
request holds no thread and no database connection, only an asyncio event. A wait is for a live miner only
(one that heartbeats), at most WAITS_PER_MINER at once each, at most MAX_WAITS in one process: past those it
is refused (409), and the node falls back to polling, so a flood of waits costs its sender, not the market."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import defaultdict
from typing import Annotated

import anyio
from fastapi import APIRouter, Query, Request
from redis.asyncio import Redis
from redis.asyncio.client import PubSub
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError

from coordinator.api.auth import Caller
from coordinator.api.schemas import CONFLICT, ERRORS
from coordinator.services.errors import Conflict
from coordinator.services.live import LiveMembership
from coordinator.wakes import CHANNEL, counter_key

log = logging.getLogger("batchmarket.api")
router = APIRouter(prefix="/v1/miners", tags=["miners"], responses=ERRORS | CONFLICT)
MAX_WAIT_S = 30
WAITS_PER_MINER = 2
MAX_WAITS = 20_000
RESUBSCRIBE_S = 1.0
HEALTH_S = 1.5  # a quiet subscription is pinged this often, and given as long to answer (one command)


class WakeWaits:
    """The waiting requests of this process, by miner, and the subscription that wakes them."""

    def __init__(self, redis: Redis, slots: anyio.CapacityLimiter) -> None:
        self.redis = redis
        self.slots = slots  # the API's Redis commands at once (coordinator.api.auth.command_slots)
        self._waiting: defaultdict[str, set[asyncio.Event]] = defaultdict(set)
        self._count = 0
        self._listener: asyncio.Task[None] | None = None

    async def counter(self, address: str) -> int:
        async with self.slots:  # a re-plan wakes a herd of waits at once
            raw = await self.redis.get(counter_key(address))
        return int(raw) if raw is not None else 0

    async def wait(self, address: str, seen: int | None, wait_s: float) -> int:
        """The miner's wake counter once it differs from `seen`, or after `wait_s` (whatever it is then)."""
        key = address.lower()
        if len(self._waiting.get(key, ())) >= WAITS_PER_MINER or self._count >= MAX_WAITS:
            raise Conflict("too many waits at once: wait for the one in flight", "too_many_waits")
        self._listen()
        woken = asyncio.Event()
        self._waiting[key].add(woken)
        self._count += 1
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_s
        try:
            while True:
                woken.clear()  # before reading: a ring after the read sets it again
                current = await self.counter(key)
                remaining = deadline - loop.time()
                if current != seen or remaining <= 0:
                    return current
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(woken.wait(), remaining)
        finally:
            self._count -= 1
            self._waiting[key].discard(woken)
            if not self._waiting[key]:
                del self._waiting[key]

    def _listen(self) -> None:
        """Starts this process's subscription (again, if it ended or belongs to another event loop)."""
        task = self._listener
        if task is not None and not task.done() and task.get_loop() is asyncio.get_running_loop():
            return
        self._listener = asyncio.get_running_loop().create_task(self._subscribe())

    async def _subscribe(self) -> None:
        while True:
            try:
                async with self.redis.pubsub() as pubsub:
                    await pubsub.subscribe(CHANNEL)
                    self._wake(list(self._waiting))  # a ring while unsubscribed: they read their counters
                    await self._relay(pubsub)
            except (RedisError, OSError) as exc:
                log.warning("wake channel: %s; subscribing again", exc)
                await asyncio.sleep(RESUBSCRIBE_S)

    async def _relay(self, pubsub: PubSub) -> None:
        """Wakes the waiters of each announcement, until the subscription fails. A subscription quiet for
        HEALTH_S is pinged: a connection that died without a word (a Redis host gone, a NAT that forgot it)
        blocks a read for ever, so a ping unanswered for HEALTH_S ends it, and `_subscribe` subscribes again
        (waking every waiter to read its counter)."""
        loop = asyncio.get_running_loop()
        pinged: float | None = None  # when the unanswered ping went out
        while True:
            message = await pubsub.get_message(timeout=HEALTH_S)
            kind = message.get("type") if message is not None else None
            if kind == "message":
                self._wake([bytes(message["data"]).decode()])
            elif kind == "pong":
                pinged = None
            elif message is None:
                if pinged is None:
                    await pubsub.ping()
                    pinged = loop.time()
                elif loop.time() - pinged >= HEALTH_S:
                    raise RedisConnectionError(f"the wake channel did not answer a ping in {HEALTH_S:g} s")

    def _wake(self, addresses: list[str]) -> None:
        for address in addresses:
            for woken in self._waiting.get(address, ()):
                woken.set()

    async def close(self) -> None:
        if self._listener is not None:
            self._listener.cancel()
            with contextlib.suppress(asyncio.CancelledError, RuntimeError):
                await self._listener


@router.get(
    "/wake",
    summary="Wait for news: this miner's wake counter, once it differs from `seen` (or after `wait_s`)",
)
async def wake(
    request: Request,
    miner: Caller,
    seen: Annotated[int | None, Query(ge=0, lt=2**63, description="The counter last returned.")] = None,
    wait_s: Annotated[float, Query(ge=0, le=MAX_WAIT_S, description="The longest wait, in seconds.")] = 25,
) -> dict[str, int]:
    """A node calls this between its steps: when the counter moved, something it acts on changed (a proposal,
    a commitment to sign, its assignment, work for a pipeline it heads), and it reads those."""
    waits: WakeWaits = request.app.state.wakes
    async with waits.slots:
        live = await waits.redis.exists(LiveMembership.key(miner))
    if not live:
        raise Conflict(f"{miner} is not live here: join (and heartbeat) first", "not_live")
    return {"counter": await waits.wait(miner, seen, wait_s)}
