"""This node's stage of the pipeline the coordinator assigned it, served in a background thread.

The coordinator's assignment names the pipeline (id and plan version), this node's position and layers, and
every stage's endpoint (and, for a stage behind NAT, the relay its peers send through). The node binds its
inbox on its own endpoint (behind NAT, where only its own driver reaches it, and it dials its relay) and links
to the next stage (or, as the last stage, back to the first); the head also drives the pipeline from a local
driver. A new assignment tears the stage down and builds the new one on the same inbox (the weights are
reloaded only if the layers changed; what a new peer sent meanwhile is taken once the node follows); every
stage of a pipeline keeps the microbatches in flight the assignment names (the coordinator plans them for
the pipeline's stage times and links), so all of them agree.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
import zmq

from client_sdk.errors import UserError
from client_sdk.protocol.link_keys import is_link_key
from miner.model.shard import StageShard
from miner.pipeline.driver import PipelineDriver
from miner.pipeline.flood import Flood
from miner.pipeline.head import STALL_S
from miner.pipeline.ledger import RequestRecord
from miner.pipeline.stage import CacheSettings, FinishedSink, Links, PeerKeys, StageWorker
from miner.transport.link import Inbox
from miner.transport.relay import RelayAddress
from miner.transport.security import LinkKeys, LinkSecurity

log = logging.getLogger("batchmarket.miner")
BIND_ATTEMPTS = 50  # a closed listener frees its port a moment later


@dataclass(frozen=True)
class StageAssignment:
    pipeline_id: int
    version: int
    position: int
    start: int
    end: int
    endpoints: tuple[str, ...]  # every stage's inbox, first stage first
    miners: tuple[str, ...] = ()  # every stage's miner address, in the same order
    link_keys: tuple[bytes, ...] = ()  # every stage's public link key (Z85), in the same order
    relays: tuple[RelayAddress | None, ...] = ()  # every stage's relay (None: dialled directly); () = none
    microbatches: int = 0  # in flight, as the coordinator planned them; 0: one per stage

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> StageAssignment:
        return cls(
            pipeline_id=int(data["pipeline_id"]),
            version=int(data["version"]),
            position=int(data["position"]),
            start=int(data["start"]),
            end=int(data["end"]),
            endpoints=tuple(str(s["endpoint"]) for s in data["stages"]),
            miners=tuple(str(s["miner"]) for s in data["stages"]),
            link_keys=tuple(str(s.get("link_key") or "").encode() for s in data["stages"]),
            relays=tuple(_relay_of(s.get("relay")) for s in data["stages"]),
            microbatches=int(data.get("microbatches") or 0),
        )

    def relay_of(self, position: int) -> RelayAddress | None:
        """The relay stage `position` takes its messages through; None if its peers dial it."""
        return self.relays[position] if self.relays else None

    @property
    def sends_to(self) -> tuple[str, str] | None:
        """(miner, where this stage's messages to it go: its endpoint or its relay's) of the stage this one
        sends to: the next one, or the head closing the ring; None for a pipeline of one."""
        if self.stages == 1 or not self.miners:
            return None
        target = (self.position + 1) % self.stages
        relay = self.relay_of(target)
        return self.miners[target], relay.endpoint if relay is not None else self.endpoints[target]

    @property
    def is_head(self) -> bool:
        return self.position == 0

    @property
    def stages(self) -> int:
        return len(self.endpoints)

    def links(self, driver: str | None, keys: PeerKeys | None = None) -> Links:
        last = self.position == self.stages - 1
        return Links(
            next_stage=None if last else self.endpoints[self.position + 1],
            first_stage=self.endpoints[0] if last and self.stages > 1 else None,
            driver=driver,
            route=self.endpoints,
            keys=keys,
            next_relay=None if last else self.relay_of(self.position + 1),
            first_relay=self.relay_of(0) if last and self.stages > 1 else None,
        )

    def peer_keys(self, own: bytes) -> PeerKeys:
        """The link keys of this stage's peers; ValueError if the assignment lacks one or names another key
        for this node than `own` (it joined with another key)."""
        if len(self.link_keys) != self.stages or not all(is_link_key(k) for k in self.link_keys):
            raise ValueError("the assignment lacks a stage's link key")
        if self.link_keys[self.position] != own:
            raise ValueError("the assignment knows this node by another link key: join again")
        last = self.stages - 1
        return PeerKeys(
            own=own,
            previous_stage=self.link_keys[self.position - 1] if self.position > 0 else None,
            next_stage=self.link_keys[self.position + 1] if self.position < last else None,
            last_stage=self.link_keys[last] if self.position == 0 and last > 0 else None,
            first_stage=self.link_keys[0] if self.position == last and last > 0 else None,
        )


@dataclass(frozen=True)
class HostSettings:
    model_dir: Path
    listen: str  # where this node's inbox binds
    cache: CacheSettings
    dtype: torch.dtype = torch.float32
    device: str = "cpu"
    link_keys: LinkKeys | None = None  # None: plain links (tests of the stage logic alone)
    stall_s: float = STALL_S  # as the head: a step's tokens not back this long start a new session
    flood: Flood | None = None  # test-only: as the first stage, flood the next (miner.pipeline.flood)


def _relay_of(data: Any) -> RelayAddress | None:
    if data is None:
        return None
    endpoint, key = str(data["endpoint"]), str(data["key"]).encode()
    if not is_link_key(key):
        raise ValueError("the assignment names a relay without a link key")
    return RelayAddress(endpoint, key)


def in_flight_cache(cache: CacheSettings, assignment: StageAssignment) -> CacheSettings:
    """The cache settings for `assignment`'s microbatches in flight. `cache.local_pages` is what one
    microbatch gets when a pipeline keeps one per stage; with more in flight (slow links), the same memory
    is split among them, so a node's KV memory does not grow with its links' latency."""
    count = max(assignment.microbatches, assignment.stages)
    pages = max(1, cache.local_pages * assignment.stages // count)
    return replace(cache, num_microbatches=count, local_pages=pages)


def forget(_request: int, _record: RequestRecord) -> None:
    """The head's stage drops its finished records: the node journals what it returns instead."""


class StageHost:
    """`finished_sink` receives the finished requests' records of a stage other than the head."""

    def __init__(self, settings: HostSettings, finished_sink: FinishedSink) -> None:
        self.settings = settings
        self.finished_sink = finished_sink
        self.assignment: StageAssignment | None = None
        self.driver: PipelineDriver | None = None  # on the head only
        self._context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        keys = settings.link_keys
        self._security = LinkSecurity(self._context, keys) if keys is not None else None
        self._shard: StageShard | None = None
        # one inbox for every assignment (rebound only if the node's relay changes): what a peer of a new
        # plan sends before this node follows it waits there instead of being lost with the old stage's
        self._inbox: Inbox | None = None
        self._inbox_relay: RelayAddress | None = None
        self._worker: StageWorker | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    @property
    def worker(self) -> StageWorker | None:
        """The stage being served (None between assignments), for its counters."""
        return self._worker

    @property
    def serving(self) -> bool:
        """A stage is up and its loop still runs."""
        return self._thread is not None and self._thread.is_alive()

    def follow(self, assignment: StageAssignment | None) -> bool:
        """Serves `assignment` (nothing for None); True if that changed what this node serves."""
        if assignment == self.assignment and (assignment is None or self.serving):
            return False
        self.stop()
        if assignment is not None:
            self._start(assignment)
        self.assignment = assignment
        return True

    def _start(self, assignment: StageAssignment) -> None:
        settings = self.settings
        shard = self._shard
        if shard is None or (shard.start, shard.end) != (assignment.start, assignment.end):
            self._shard = None  # free the old layers before loading the new ones
            shard = StageShard.load(
                settings.model_dir, assignment.start, assignment.end, settings.dtype, settings.device
            )
            self._shard = shard
        cache = in_flight_cache(settings.cache, assignment)
        security = self._security
        peers = None
        if security is not None:
            peers = assignment.peer_keys(security.keys.public)
            security.allow(peers.senders())
        sink = forget if assignment.is_head else self.finished_sink
        inbox = self._inbox_for(assignment.relay_of(assignment.position))
        worker = StageWorker(
            shard,
            cache,
            self._context,
            finished_sink=sink,
            security=security,
            inbox=inbox,
            plan_version=assignment.version,
            stall_s=settings.stall_s,
            flood=settings.flood,
        )
        driver = PipelineDriver(self._context, security=security) if assignment.is_head else None
        worker.connect(assignment.links(driver.endpoint if driver else None, peers))
        if driver is not None:
            driver.connect(worker.inbox.endpoint)
        self._stop.clear()
        self._worker, self.driver = worker, driver
        self._thread = threading.Thread(target=self._serve, args=(worker,), daemon=True, name="stage")
        self._thread.start()
        log.info(
            "serving layers [%d, %d) as stage %d of %d of pipeline %d (plan version %d)",
            assignment.start,
            assignment.end,
            assignment.position + 1,
            assignment.stages,
            assignment.pipeline_id,
            assignment.version,
        )

    def _inbox_for(self, relay: RelayAddress | None) -> Inbox:
        """The node's inbox, bound on its first assignment (again if its relay changed)."""
        if self._inbox is not None and self._inbox_relay == relay:
            return self._inbox
        if self._inbox is not None:
            self._inbox.close()
            self._inbox = None
        for _ in range(BIND_ATTEMPTS):
            try:
                self._inbox = Inbox(self._context, self.settings.listen, security=self._security, relay=relay)
            except zmq.ZMQError as exc:
                if exc.errno != zmq.EADDRINUSE:
                    raise UserError(f"cannot listen on {self.settings.listen}: {exc}") from None
                time.sleep(0.1)  # the join's listener, closed a moment ago, may still hold the port
                continue
            self._inbox_relay = relay
            return self._inbox
        raise UserError(f"cannot listen on {self.settings.listen}: the address is in use")

    def _serve(self, worker: StageWorker) -> None:
        try:
            worker.serve(keep_going=lambda: not self._stop.is_set())
        except Exception:  # a bug, not a bad message (those are dropped inside): the node rebuilds the stage
            log.exception("the stage stopped")

    def progress(self) -> Mapping[int, tuple[int, ...]]:
        """On the head: each unfinished request's output tokens so far, as of the stage's latest step (empty
        elsewhere). Safe from any thread: the stage thread replaces this snapshot whole, never changes it."""
        worker = self._worker
        return worker.progress if worker is not None else {}

    def check(self) -> None:
        """Raises if the stage behind the driver is gone (for PipelineDriver.completions)."""
        if not self.serving or self._stop.is_set():
            raise RuntimeError("the stage stopped")

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        for closeable in (self.driver, self._worker):
            if closeable is not None:
                closeable.close()
        self._thread = self._worker = self.driver = None
        self.assignment = None

    def close(self) -> None:
        self.stop()
        if self._inbox is not None:
            self._inbox.close()
        if self._security is not None:
            self._security.stop()
        self._context.term()
