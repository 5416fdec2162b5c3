"""The stage loop: one process, one shard, an inbox from the previous stage and an outbox to the next.

Every stage mirrors the page tables and token records of the requests it serves from the headers it sees
(`StageLedger`); the last stage samples and sends the tokens back to the first, closing the ring; the first
stage also schedules (`Head`), takes requests from a driver and streams completions back to it. A message
that breaks the protocol is logged and dropped; the stage keeps serving. On secured links each message must
also come from the one peer entitled to send its kind: activations from the previous stage, tokens from the
last, requests and shutdown from this stage's own node.

Every stage serves one epoch at a time (plan version, head session; see miner.transport.frames). A message of
a newer session of the same plan makes a stage start over: it frees the pages and forgets the unfinished
records of the old session (whose requests the head submits again). A message of an older epoch is dropped
and counted (`stale`); one of a newer plan is held on the inbox for the stage this node builds when it follows
that plan.
"""

from __future__ import annotations

import logging
import statistics
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import torch

from client_sdk.throttled_log import ThrottledLog
from miner.attention.layout import BatchLayout
from miner.engine.sampler import sample
from miner.kv.cache import PAGE_SIZE
from miner.kv.offload import MicrobatchKVCache
from miner.model.shard import StageShard
from miner.pipeline.flood import Flood
from miner.pipeline.head import STALL_S, Head
from miner.pipeline.ledger import RequestRecord, StageLedger
from miner.transport.frames import DTYPE_NAMES, FrameError, Header, message
from miner.transport.link import Context, Inbox, Outbox, Received
from miner.transport.relay import RelayAddress
from miner.transport.security import LinkSecurity

log = logging.getLogger(__name__)
# a head's session is its clock in nanoseconds: one further ahead of ours than a day (clocks are not that far
# apart) is a peer's claim, not a session
MAX_SESSION_AHEAD_NS = 86_400 * 10**9


@dataclass(frozen=True)
class CacheSettings:
    page_size: int = PAGE_SIZE
    local_pages: int = 256  # per microbatch, always on the device
    global_pages: int = 0  # per microbatch, offloaded between its turns (DeServe); 0 = no offloading
    num_microbatches: int = 1
    max_seqs: int = 32  # per microbatch (first stage only)
    token_budget: int = 512  # tokens per microbatch step (first stage only)


@dataclass(frozen=True)
class PeerKeys:
    """The public link keys of a secured stage's peers (None where it has no such peer)."""

    # whoever controls this stage (sends requests and shutdown; on the first stage, its driver's inbox takes
    # the completions): the node's own driver, or in a local pipeline the driver or the stage before
    own: bytes
    previous_stage: bytes | None = None  # sends this stage activations
    next_stage: bytes | None = None  # takes this stage's activations
    last_stage: bytes | None = None  # on the first stage of several: sends it the sampled tokens
    first_stage: bytes | None = None  # on the last stage of several: takes its sampled tokens

    def senders(self) -> set[bytes]:
        """The keys that may connect to this stage's inbox."""
        return {k for k in (self.own, self.previous_stage, self.last_stage) if k is not None}


@dataclass(frozen=True)
class Links:
    """Where this stage sends: the next stage (absent on the last), the first stage (the ring, on the last
    stage of a multi-stage pipeline) and the driver (on the first stage); on secured links, the peers'
    keys, and the relay of a peer that takes its messages through one (behind NAT)."""

    next_stage: str | None = None
    first_stage: str | None = None
    driver: str | None = None
    route: tuple[str, ...] = ()
    latency_ms: float = 0.0  # injected on the links between stages, for benchmarks
    keys: PeerKeys | None = None
    next_relay: RelayAddress | None = None
    first_relay: RelayAddress | None = None


FinishedSink = Callable[[int, RequestRecord], None]


class StageWorker:
    """`finished_sink`, when given, receives each finished request's record, which the stage then forgets
    (a long-running stage must not keep every request it ever served). Given a `relay`, the stage also takes
    its peers' messages through it (it is behind NAT: `bind` is where only its own driver reaches it). Given
    an `inbox`, the stage takes its messages there instead of binding one (`bind` and `relay` unused) and
    leaves it open when it closes: a node keeps one inbox across its assignments, so that nothing sent to it
    while it changes stages is lost. `plan_version` is the coordinator's plan this stage serves (0 for a
    pipeline no coordinator planned); `stall_s` how long the head waits for a step's tokens before it starts
    a new session."""

    def __init__(
        self,
        shard: StageShard,
        settings: CacheSettings,
        context: Context,
        bind: str = "tcp://127.0.0.1:*",
        finished_sink: FinishedSink | None = None,
        security: LinkSecurity | None = None,
        relay: RelayAddress | None = None,
        inbox: Inbox | None = None,
        plan_version: int = 0,
        stall_s: float = STALL_S,
        flood: Flood | None = None,
    ) -> None:
        self.shard = shard
        self.flood = flood  # test-only: a first stage that floods the next (miner.pipeline.flood)
        self.security = security
        self.finished_sink = finished_sink
        self.settings = settings
        self.cache = MicrobatchKVCache(
            shard.kv_shape,
            settings.num_microbatches,
            settings.local_pages,
            settings.global_pages,
            settings.page_size,
        )
        self.ledger = StageLedger(
            settings.num_microbatches, self.cache.pages_per_microbatch, settings.page_size
        )
        self.head = (
            Head(
                settings.num_microbatches,
                self.cache.pages_per_microbatch,
                settings.page_size,
                settings.max_seqs,
                settings.token_budget,
                plan_version=plan_version,
                stall_s=stall_s,
                vocab_size=shard.config.vocab_size,
            )
            if shard.is_first
            else None
        )
        # the epoch served: the head's own; elsewhere the plan's, with the session of the first message
        self.epoch = self.head.epoch if self.head is not None else (plan_version, 0)
        self.stale = 0  # messages of an ended session or an older plan, dropped
        self._epoch_heard_at = time.monotonic()  # when a message of the epoch served last came
        self._context = context
        self._owns_inbox = inbox is None
        self.inbox = inbox if inbox is not None else Inbox(context, bind, security=security, relay=relay)
        self.inbox.release_held()  # what a peer of this plan sent before the node followed it
        self._keys: PeerKeys | None = None
        self._next: Outbox | None = None
        self._ring: Outbox | None = None
        self._driver: Outbox | None = None
        self.steps = 0
        self.busy_s = 0.0
        self.step_s: deque[float] = deque(maxlen=1_000)  # the latest steps' compute times
        # (monotonic time, tokens) of each sampled step that came back, for throughput over time
        self.token_times: deque[tuple[float, int]] = deque(maxlen=100_000)
        self.dropped = 0
        self._warn = ThrottledLog(log)  # messages a peer can make it drop at will: one line per 10 s per kind
        # first stage only: each unfinished request's output tokens so far. Replaced whole (never changed in
        # place) after every step's tokens come back, so another thread may read it without a lock.
        self.progress: Mapping[int, tuple[int, ...]] = {}
        self._draining = False
        self.stopped = False

    @property
    def records(self) -> dict[int, RequestRecord]:
        """Per request, the prompt and output token ids this stage saw, and whether it finished; the leaves
        this stage checks before signing results."""
        return self.ledger.records

    def connect(self, links: Links) -> None:
        if (self.security is None) != (links.keys is None):
            raise ValueError("a secured stage needs its peers' keys, and only a secured one takes them")
        keys = self._keys = links.keys
        if not self.shard.is_last:
            if links.next_stage is None:
                raise ValueError("a stage before the last needs the next stage's endpoint")
            self._next = self._outbox(
                links.next_stage, links.latency_ms, keys.next_stage if keys else None, links.next_relay
            )
        if self.head is None:
            if self.shard.is_last:
                if links.first_stage is None:
                    raise ValueError("the last stage needs the first stage's endpoint")
                self._ring = self._outbox(
                    links.first_stage, links.latency_ms, keys.first_stage if keys else None, links.first_relay
                )
        else:
            if links.driver is None:
                raise ValueError("the first stage needs the driver's endpoint")
            self._driver = self._outbox(links.driver, 0.0, keys.own if keys else None)
            self.head.route = links.route
        self.inbox.announce()  # behind a relay: the peers just named may send from now on

    def _outbox(
        self, endpoint: str, latency_ms: float, server_key: bytes | None, relay: RelayAddress | None = None
    ) -> Outbox:
        return Outbox(self._context, endpoint, latency_ms, self.security, server_key, relay)

    def serve(self, keep_going: Callable[[], bool] = lambda: True, poll_ms: int = 100) -> None:
        """Runs until a shutdown message has gone through (or `keep_going` says no). A message that breaks the
        protocol is dropped; one that gets past the checks and still fails (whatever it raises) is dropped
        too, and the stage starts over in a new session (the head) or with an empty ledger (the others), so no
        peer can stop the stage's thread."""
        while not self.stopped and keep_going():
            got = self.inbox.receive(poll_ms)
            try:
                if got is not None:
                    self.handle(got.header, got.tensor, got.sender)
                if self.head is not None:
                    if self.head.stalled:
                        self._restart_session(f"no tokens came back for a step in {self.head.stall_s:.0f} s")
                    self._launch()
            except FrameError as exc:
                self.dropped += 1
                self._warn.warning(
                    "dropped", "stage [%d, %d) dropped a message: %s", self.shard.start, self.shard.end, exc
                )
            except Exception as exc:  # a peer must not be able to end this loop
                self.dropped += 1
                self._warn.warning(
                    "failed",
                    "stage [%d, %d) failed on a message (%s: %s); it starts over",
                    self.shard.start,
                    self.shard.end,
                    type(exc).__name__,
                    exc,
                )
                if self.head is not None:
                    self._restart_session("a message failed")
                else:
                    self.ledger = self.ledger.restarted()

    def handle(self, header: Header, tensor: torch.Tensor, sender: bytes | None = None) -> None:
        expected = ("submit", "tokens", "shutdown") if self.head else ("activations", "shutdown")
        if header.kind not in expected:
            raise FrameError(f"a {header.kind!r} message cannot reach this stage")
        if self._keys is not None and sender != self._entitled(header.kind, self._keys):
            raise FrameError(f"a {header.kind!r} message from a peer not entitled to send it")
        if header.kind in ("activations", "tokens") and not self._in_epoch(header, tensor, sender):
            return
        if header.kind == "shutdown":
            self._draining = True
            if self.head is None:
                self._stop()
        elif header.kind == "submit":
            assert self.head is not None
            self.head.submit(header)
        elif header.kind == "tokens":
            self._complete(header)
        else:
            self._run(header, tensor)

    def _in_epoch(self, header: Header, tensor: torch.Tensor, sender: bytes | None) -> bool:
        """Whether a message of the pipeline's traffic belongs to the epoch this stage serves, after starting
        the session it opens (on a stage after the head: a newer one of this plan, or any one of this plan
        once the session served has been silent for STALL_S, so that neither a head whose clock stepped back
        nor a peer that once claimed a far-future session locks the stage out; a session more than
        MAX_SESSION_AHEAD_NS past this stage's clock is refused). A newer plan's message is held on the inbox
        for the next stage; an older epoch's dropped and counted."""
        now = time.monotonic()
        if header.epoch == self.epoch:
            self._epoch_heard_at = now
            return True
        plan, session = header.epoch
        if self.head is None and plan > self.epoch[0]:
            self.inbox.hold(Received(header, tensor, sender))
            return False
        if (
            self.head is None
            and plan == self.epoch[0]
            and session <= time.time_ns() + MAX_SESSION_AHEAD_NS
            and (session > self.epoch[1] or now - self._epoch_heard_at > STALL_S)
        ):
            self._follow_session(header.epoch)
            self._epoch_heard_at = now
            return True
        self.stale += 1
        self._warn.warning(
            "stale",
            "stage [%d, %d) dropped a message of epoch %s",
            self.shard.start,
            self.shard.end,
            header.epoch,
        )
        return False

    def _follow_session(self, epoch: tuple[int, int]) -> None:
        """A new session of the head: the pages and unfinished records of the old one are freed."""
        dropped = sum(1 for record in self.ledger.records.values() if not record.finished)
        if dropped:
            self._warn.warning(
                "session",
                "stage [%d, %d): the head started a new session; freed %d unfinished requests of the old one",
                self.shard.start,
                self.shard.end,
                dropped,
            )
        self.ledger = self.ledger.restarted()
        self.epoch = epoch

    def _restart_session(self, why: str) -> None:
        """The head starts over in a new session (its steps stopped coming back, or one failed)."""
        assert self.head is not None
        self._warn.warning(
            "restart", "stage [%d, %d): %s; starting a new session", self.shard.start, self.shard.end, why
        )
        self.head.restart()
        self.epoch = self.head.epoch
        self.ledger = self.ledger.restarted()

    @staticmethod
    def _entitled(kind: str, keys: PeerKeys) -> bytes | None:
        """The one peer that may send a message of `kind` to this stage on secured links."""
        if kind == "activations":
            return keys.previous_stage
        if kind == "tokens":
            return keys.last_stage
        return keys.own  # submit, shutdown: the node's own driver

    def _launch(self) -> None:
        """Sends every microbatch step the scheduler can start now; stops once drained after a shutdown."""
        assert self.head is not None
        while (step := self.head.next_step()) is not None:
            self._run(*step)
        if self._draining and self.head.idle:
            self._stop()

    def _run(self, header: Header, inputs: torch.Tensor) -> None:
        if not self.shard.is_first and (
            inputs.dtype != self.shard.dtype or tuple(inputs.shape[1:]) != (self.shard.config.hidden_size,)
        ):
            raise FrameError(f"activations of {inputs.dtype} {list(inputs.shape)} do not fit this stage")
        tables = self.ledger.apply(header)
        if self.finished_sink is not None:
            for done in header.finished:
                self.finished_sink(done.request_id, self.ledger.hand_over(done.request_id))
        started = time.perf_counter()
        out = self._forward(header, inputs, tables)
        if not self.shard.is_last:
            assert self._next is not None
            sent = replace(header, dtype=DTYPE_NAMES[out.dtype], shape=tuple(out.shape))
            if self.flood is not None and self.shard.is_first:
                sent, out = self.flood(sent, out)
            self._next.send(sent, out)
            self._account(started)
            return
        rows = [i for i, flag in enumerate(header.sample) if flag]
        records = [self.ledger.records[header.request_ids[i]] for i in rows]
        positions = tuple(header.positions[i] + header.query_lens[i] for i in rows)
        tokens = sample(out[rows], [r.spec.params for r in records], list(positions))
        for record, position, token in zip(records, positions, tokens, strict=True):
            record.write(position, [token])
        self._account(started)
        reply = message(
            "tokens",
            header.microbatch,
            request_ids=tuple(header.request_ids[i] for i in rows),
            positions=positions,
            token_ids=tuple(tokens),
            route=header.route,
            epoch=header.epoch,
        )
        if self._ring is not None:
            self._ring.send(*reply)
        else:  # a one-stage pipeline closes the ring in place
            self._complete(reply[0])

    @torch.inference_mode()
    def _forward(self, header: Header, inputs: torch.Tensor, tables: list[list[int]]) -> torch.Tensor:
        if not header.request_ids:  # a step that only carries finished/preempted notices
            width = self.shard.config.vocab_size if self.shard.is_last else self.shard.config.hidden_size
            return torch.empty(0, width, dtype=torch.float32 if self.shard.is_last else self.shard.dtype)
        microbatch = header.microbatch
        # the next microbatch in round-robin order is prefetched; any other order is still correct
        self.cache.begin_step(microbatch, (microbatch + 1) % self.settings.num_microbatches)
        layout = BatchLayout(
            context_lens=header.positions,
            query_lens=header.query_lens,
            block_tables=tuple(tuple(self.cache.physical(microbatch, t)) for t in tables),
            page_size=self.settings.page_size,
        )
        out = self.shard.forward(inputs.to(self.shard.device), layout, self.cache.device_cache)
        return out.cpu()

    def _complete(self, header: Header) -> None:
        assert self.head is not None and self._driver is not None
        completions = self.head.on_tokens(header)
        self.progress = self.head.progress()
        self.token_times.append((time.monotonic(), len(header.token_ids)))
        if completions:
            self._driver.send(
                *message(
                    "completions",
                    request_ids=tuple(c.request_id for c in completions),
                    positions=tuple(c.prompt_len for c in completions),
                    query_lens=tuple(len(c.output) for c in completions),
                    token_ids=tuple(t for c in completions for t in c.output),
                )
            )

    def _account(self, started: float) -> None:
        elapsed = time.perf_counter() - started
        self.steps += 1
        self.busy_s += elapsed
        self.step_s.append(elapsed)

    def _stop(self) -> None:
        if self._next is not None:
            self._next.send(*message("shutdown"))
        self.stopped = True

    def report(self) -> dict[str, Any]:
        """Counters and the per-request records, as plain data (msgpack-able)."""
        return {
            "start": self.shard.start,
            "end": self.shard.end,
            "steps": self.steps,
            "busy_s": self.busy_s,
            "median_step_s": statistics.median(self.step_s) if self.step_s else 0.0,
            "bytes_swapped": self.cache.bytes_swapped,
            "dropped": self.dropped + self.inbox.rejected,
            "stale": self.stale,
            "token_times": [list(entry) for entry in self.token_times],
            "preemptions": sum(s.preemptions for s in self.head.schedulers) if self.head else 0,
            "records": [
                [request_id, r.spec.prompt_len, r.tokens, r.finished]
                for request_id, r in self.records.items()
            ],
        }

    def close(self) -> None:
        for outbox in (self._next, self._ring, self._driver):
            if outbox is not None:
                outbox.close()
        if self._owns_inbox:
            self.inbox.close()
