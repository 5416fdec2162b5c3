"""A relay for stages that accept no inbound connection (behind NAT): they dial out to it, and their peers
send to them through it.

One ZeroMQ ROUTER socket, a CURVE server under the relay's own key; everyone dials it with a DEALER socket:
- a relayed stage sends `[HELLO, key of each peer it takes messages from...]` on connecting, whenever its
  peers change and every `HELLO_S` after; the relay answers `[HELLO]` and from then on delivers to it, by
  the key its CURVE handshake proved, what those peers send it, and nothing else (messages that come for it
  before its first hello, or from a peer its hello does not name yet, wait at the relay for a while: a new
  plan's peer may send before the stage says hello for that plan);
- a sending stage sends `[TO, receiver's key, stamp, seal, *frames]`; the relay delivers `[sender's key,
  stamp, seal, *frames]` to the receiver, naming the sender by the key its own handshake proved.
The frames pass through as they came: the relay never decodes them. Only members are served (see
miner.transport.relay_admission): a hello only from a stage joined through this relay, a message only from a
joined miner to such a stage; one from a key not known yet is held until the members are looked up again.
Everything else is dropped and logged: a message from a stranger, from a key the receiver does not take, for
a receiver that never connects, or malformed. The seal (see miner.transport.seal) lets the receiver check end
to end that the sender made the message, so a relay that misbehaves can drop or delay messages but not forge,
alter or replay them. A relay can hold every message for a fixed latency before it goes on, to emulate a far
relay in benchmarks (off by default).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import zmq

from client_sdk.protocol.link_keys import is_link_key
from client_sdk.throttled_log import ThrottledLog
from miner.transport.frames import DEFAULT_LIMITS, Limits
from miner.transport.relay_admission import Admission, RelayMembers
from miner.transport.security import LinkKeys, LinkSecurity

log = logging.getLogger(__name__)

HELLO = b"hello"
TO = b"to"
HELLO_S = 2.0  # how often a relayed stage says hello (it also re-registers it after a relay restart)
FORGET_S = 5 * HELLO_S  # a relayed stage silent this long is no longer delivered to
MAX_PEERS = 64  # keys one hello may name
MAX_RELAYED = 4_096  # stages one relay delivers to (anyone can make a key and say hello)
# messages queued for one relayed stage; a stage keeps at most its microbatches in flight (16), so a queue
# this long means it takes nothing: its messages are dropped rather than the relay waiting on it, and a
# stage that stops reading cannot hold more than this of the relay's memory
QUEUE_PER_STAGE = 64
ENVELOPE_BYTES = 1_024  # the relay's frames around a stage message
# messages held for one stage not connected yet, or from a peer its hello does not name yet (a new plan's peer
# may send before the stage says hello for that plan), for WAIT_S at most
MAX_WAITING = 64
MAX_WAITING_BYTES = 256 * 2**20  # held for all such stages together
WAIT_S = FORGET_S
NOT_CONNECTED = "a message for a stage not connected to this relay"
NOT_TAKEN = "a message from a peer its receiver does not take"
# messages from keys not known yet, held until the members are looked up (a fraction of a second) and for
# FORGET_S at most; per key no more than a stage keeps in flight, so one stranger's key holds little, but
# strangers with many keys can fill this, and past it such messages are dropped rather than held
MAX_HELD = 1_024
MAX_HELD_PER_KEY = 16
MAX_HELD_BYTES = 64 * 2**20  # or one message of the largest size, if more
NOT_JOINED = "a hello from a stage not joined through this relay"
NOT_A_MINER = "a message from a key no joined miner holds"
NOT_RELAYED = "a message for a stage not joined through this relay"
HELD_FULL = "a message from a key not known yet, beyond what the relay holds"
HELD_TOO_LONG = "a message from a key not known yet, held past its time (the coordinator did not answer)"


@dataclass(frozen=True)
class RelayAddress:
    """Where a relay listens and the CURVE key it proves it holds there."""

    endpoint: str
    key: bytes


@dataclass
class _Relayed:
    routing_id: bytes
    senders: frozenset[bytes]
    seen: float


@dataclass
class _Unknown:
    """A message held until the members are looked up again (ask number `ask`): a hello (`peers` set) or a
    message for `receiver`."""

    ask: int
    arrived: float
    sender: bytes
    routing_id: bytes
    peers: list[bytes] | None
    receiver: bytes
    frames: list[zmq.Frame]
    size: int


@dataclass
class RelayCounters:
    forwarded: int = 0
    dropped: int = 0
    relayed: int = 0  # stages connected now
    drops: dict[str, int] = field(default_factory=dict)  # by reason


class Relay:
    """Forwards sealed stage messages between the members `admission` names until `stop` is called (see the
    module)."""

    def __init__(
        self,
        keys: LinkKeys,
        listen: str,
        admission: Admission,
        limits: Limits = DEFAULT_LIMITS,
        latency_ms: float = 0.0,
    ) -> None:
        self._context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        self._security = LinkSecurity(self._context, keys)
        self._socket = self._context.socket(zmq.ROUTER)
        self._socket.setsockopt(zmq.MAXMSGSIZE, limits.max_message_bytes + ENVELOPE_BYTES)
        self._socket.setsockopt(zmq.ROUTER_MANDATORY, 1)  # an undeliverable message raises, so it is logged
        self._socket.setsockopt(zmq.SNDHWM, QUEUE_PER_STAGE)
        self._socket.setsockopt(zmq.LINGER, 0)
        self._security.serve(self._socket)
        try:
            self._socket.bind(listen)
        except zmq.ZMQError:
            self.close()  # the authenticator's thread and the context, not only the socket
            raise
        self.address = RelayAddress(self._socket.getsockopt_string(zmq.LAST_ENDPOINT), keys.public)
        self._relayed: dict[bytes, _Relayed] = {}
        self.counters = RelayCounters()
        self._warn = ThrottledLog(log)  # drops a stranger can cause at will: one line per 10 s per reason
        self._stop = threading.Event()
        self.latency_s = latency_ms / 1_000
        self._delayed: deque[tuple[float, bytes, bytes, list[zmq.Frame]]] = deque()
        # per stage, the messages waiting for its hello (arrival, sender, frames), oldest first; a stage's
        # leave whole once the oldest waited WAIT_S
        self._waiting: dict[bytes, list[tuple[float, bytes, list[zmq.Frame]]]] = {}
        self._waiting_bytes = 0
        self._swept_at = -math.inf
        largest = limits.max_message_bytes + ENVELOPE_BYTES  # what is held must take one message of any size
        self._max_waiting_bytes = max(MAX_WAITING_BYTES, largest)
        self._max_held_bytes = max(MAX_HELD_BYTES, largest)
        self._admission = admission
        self._unknown: deque[_Unknown] = deque()  # in ask order
        self._unknown_bytes = 0
        self._unknown_senders: dict[bytes, int] = {}  # messages held per sender (theirs wait behind them)

    def serve(self, now: Callable[[], float] = time.monotonic) -> None:
        """Forwards messages until `stop`."""
        while not self._stop.is_set():
            while self._delayed and self._delayed[0][0] <= now():
                _, sender, receiver, frames = self._delayed.popleft()
                self._deliver(sender, receiver, frames)
            arrived = self._socket.poll(self._poll_ms(now()))
            members = self._settle_unknown(now())  # the held ones first, on the members the new one meets
            if arrived:
                self._take(self._socket.recv_multipart(copy=False), members, now())
            self.counters.relayed = len(self._relayed)
            self._expire_waiting(now())

    def _poll_ms(self, now: float) -> int:
        """How long to wait for a message before a delayed one is due or held ones may be decided."""
        # rounded up: rounded down, it would wake early and poll in a busy loop until the message is due
        due_ms = 100 if not self._delayed else max(0, math.ceil(1_000 * (self._delayed[0][0] - now)))
        return min(due_ms, 20) if self._unknown else due_ms

    def _take(self, frames: list[zmq.Frame], members: RelayMembers, now: float) -> None:
        if len(frames) < 2:
            self._drop("an empty message")
            return
        routing_id, kind = frames[0].bytes, frames[1].bytes
        sender = str(frames[1].get("User-Id")).encode()  # the key its CURVE handshake proved
        known = sender not in self._unknown_senders  # else it waits behind its messages held already
        if kind == HELLO:
            peers = [f.bytes for f in frames[2:]]
            if len(peers) > MAX_PEERS or not all(is_link_key(p) for p in peers):
                self._drop("a hello that does not name link keys", sender)
            elif known and sender in members.relayed:
                self._hello(sender, routing_id, peers, now)
            else:
                self._hold_unknown(sender, routing_id, peers, b"", [], now)
        elif kind == TO and len(frames) >= 6 and is_link_key(frames[2].bytes):
            receiver = frames[2].bytes  # a key (so one held costs what its frames cost)
            if known and sender in members.senders and receiver in members.relayed:
                self._forward(sender, receiver, frames[3:], now)
            else:
                self._hold_unknown(sender, routing_id, None, receiver, frames[3:], now)
        else:
            self._drop("a message that is neither a hello nor a sealed message", sender)

    def _hold_unknown(
        self,
        sender: bytes,
        routing_id: bytes,
        peers: list[bytes] | None,
        receiver: bytes,
        rest: list[zmq.Frame],
        now: float,
    ) -> None:
        """Holds a message from a key the members did not name (or from a sender with messages held already,
        so that they stay in order) until the members are looked up again."""
        size = sum(len(f.buffer) for f in rest) + ENVELOPE_BYTES
        full = len(self._unknown) >= MAX_HELD or self._unknown_senders.get(sender, 0) >= MAX_HELD_PER_KEY
        if full or self._unknown_bytes + size > self._max_held_bytes:
            self._drop(HELD_FULL, sender, receiver or None)
            return
        ask = self._admission.ask()
        self._unknown.append(_Unknown(ask, now, sender, routing_id, peers, receiver, rest, size))
        self._unknown_bytes += size
        self._unknown_senders[sender] = self._unknown_senders.get(sender, 0) + 1

    def _settle_unknown(self, now: float) -> RelayMembers:
        """Decides each held message whose sender has been looked up since it came, oldest first; returns
        the members the next message is checked against (the same, so none overtakes a held one)."""
        members, answered = self._admission.view()
        while self._unknown and (
            self._unknown[0].ask <= answered or now - self._unknown[0].arrived > FORGET_S
        ):
            held = self._unknown.popleft()
            self._unknown_bytes -= held.size
            left = self._unknown_senders.pop(held.sender) - 1
            if left:
                self._unknown_senders[held.sender] = left
            if held.ask > answered:
                self._drop(HELD_TOO_LONG, held.sender, held.receiver or None)
            elif held.peers is not None:
                if held.sender in members.relayed:
                    self._hello(held.sender, held.routing_id, held.peers, now)
                else:
                    self._drop(NOT_JOINED, held.sender)
            elif held.sender not in members.senders:
                self._drop(NOT_A_MINER, held.sender, held.receiver)
            elif held.receiver not in members.relayed:
                self._drop(NOT_RELAYED, held.sender, held.receiver)
            else:
                self._forward(held.sender, held.receiver, held.frames, now)
        return members

    def _hello(self, sender: bytes, routing_id: bytes, peers: list[bytes], now: float) -> None:
        if sender not in self._relayed:
            if len(self._relayed) >= MAX_RELAYED:
                self._forget_silent(now)
            if len(self._relayed) >= MAX_RELAYED:
                self._drop("a hello beyond the stages this relay can take", sender)
                return
            log.info("relaying to %s", sender.decode())
        self._relayed[sender] = _Relayed(routing_id, frozenset(peers), now)
        try:
            self._socket.send_multipart([routing_id, HELLO], flags=zmq.NOBLOCK)
        except zmq.ZMQError:
            return  # gone again; its next hello registers it anew
        for arrived, waiting_sender, frames in self._take_waiting(sender):
            self._forward(waiting_sender, sender, frames, now, arrived)

    def _forget_silent(self, now: float) -> None:
        for key in [k for k, relayed in self._relayed.items() if now - relayed.seen > FORGET_S]:
            del self._relayed[key]

    def _forward(
        self, sender: bytes, receiver: bytes, rest: list[zmq.Frame], now: float, arrived: float | None = None
    ) -> None:
        """Delivers a message (that came at `arrived`, default now) to its receiver if it is connected and
        takes its sender; else it waits for the receiver's next hello."""
        target = self._relayed.get(receiver)
        if target is not None and now - target.seen > FORGET_S:
            del self._relayed[receiver]
            target = None
        if target is None or sender not in target.senders:
            self._wait(sender, receiver, rest, now if arrived is None else arrived)
            return
        if self.latency_s > 0:
            self._delayed.append((now + self.latency_s, sender, receiver, rest))
        else:
            self._deliver(sender, receiver, rest)

    def _deliver(self, sender: bytes, receiver: bytes, rest: list[zmq.Frame]) -> None:
        target = self._relayed.get(receiver)
        if target is None:
            self._drop(NOT_CONNECTED, sender, receiver)
            return
        try:
            self._socket.send_multipart([target.routing_id, sender, *rest], flags=zmq.NOBLOCK, copy=False)
        except zmq.ZMQError:  # gone (EHOSTUNREACH) or taking nothing (EAGAIN: its queue is full)
            self._drop("a message its receiver could not take", sender, receiver)
            return
        self.counters.forwarded += 1

    def _wait(self, sender: bytes, receiver: bytes, frames: list[zmq.Frame], arrived: float) -> None:
        """Holds a message until its receiver says a hello that takes it, within the bounds."""
        size = sum(len(f.buffer) for f in frames)
        queue = self._waiting.get(receiver)
        full = len(self._waiting) >= MAX_RELAYED if queue is None else len(queue) >= MAX_WAITING
        if full or self._waiting_bytes + size > self._max_waiting_bytes:
            self._drop(self._why_waiting(receiver), sender, receiver)
            return
        self._waiting.setdefault(receiver, []).append((arrived, sender, frames))
        self._waiting_bytes += size

    def _why_waiting(self, receiver: bytes) -> str:
        return NOT_TAKEN if receiver in self._relayed else NOT_CONNECTED

    def _take_waiting(self, receiver: bytes) -> list[tuple[float, bytes, list[zmq.Frame]]]:
        queue = self._waiting.pop(receiver, [])
        self._waiting_bytes -= sum(len(f.buffer) for _, _, frames in queue for f in frames)
        return queue

    def _expire_waiting(self, now: float) -> None:
        """Drops each stage's waiting messages once the oldest waited WAIT_S; looks twice a second."""
        if now - self._swept_at < 0.5:
            return
        self._swept_at = now
        for receiver in [r for r, queue in self._waiting.items() if now - queue[0][0] > WAIT_S]:
            reason = self._why_waiting(receiver)
            for _, sender, _ in self._take_waiting(receiver):
                self._drop(reason, sender, receiver)

    def _drop(self, reason: str, sender: bytes | None = None, receiver: bytes | None = None) -> None:
        self.counters.dropped += 1
        self.counters.drops[reason] = self.counters.drops.get(reason, 0) + 1
        self._warn.warning(
            reason,
            "relay dropped %s (from %s to %s)",
            reason,
            sender.decode() if sender else "unknown",
            receiver.decode(errors="replace") if receiver else "-",
        )

    def stop(self) -> None:
        self._stop.set()

    def close(self) -> None:
        self._socket.close(linger=0)
        self._security.stop()
        self._context.term()
