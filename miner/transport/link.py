"""ZeroMQ links between stages: an Outbox pushes messages to the next stage, an Inbox pulls them in.

With a LinkSecurity both ends speak CURVE (see miner.transport.security): the inbox takes messages only from
allowed keys and tells, for each, which key sent it; the outbox talks only to the holder of the key it was
given.
A stage behind NAT takes its peers' messages through a relay (miner.transport.relay): its inbox also dials
the relay, and an outbox given the relay's address sends there, sealed for the receiver, which checks the seal
before it takes the message.
A message from a key the inbox does not take (yet) is kept a few seconds (UNASSIGNED_S), within bounds, before
it is dropped: when a new plan forms, a peer may start sending before this node has followed it, and what it
sent then is taken once the node's assignment names it.
A message of a plan this node has not followed yet, from a peer it already takes, is held the same way (the
stage hands it back, `hold`) until the next stage built on this inbox takes it (`release_held`).
Without a LinkSecurity (a local pipeline of processes on one machine) the links are plain TCP. An Outbox can
hold every message for a fixed one-way latency before it leaves, to emulate a far link in benchmarks (off by
default). An Inbox drops and logs malformed messages and keeps serving.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from typing import NamedTuple

import torch
import zmq

from client_sdk.throttled_log import ThrottledLog
from miner.transport.frames import DEFAULT_LIMITS, FrameError, Header, Limits, decode, encode
from miner.transport.relay import ENVELOPE_BYTES, HELLO, HELLO_S, TO, RelayAddress
from miner.transport.security import LinkSecurity

log = logging.getLogger(__name__)
RELAY_ANSWER_S = 5.0  # how long a relayed inbox waits for the relay to take its hello
# messages from keys not in the assignment (yet): kept this long, this many, and this many bytes (or one
# message of the largest size, if more) at most
UNASSIGNED_S = 5.0
MAX_UNASSIGNED = 64
MAX_UNASSIGNED_BYTES = 64 * 2**20
NOT_ASSIGNED = "a message from a peer not in the assignment"
RECEIVE_QUEUE = (
    32  # messages queued per connection before its sender waits (a pipeline keeps at most 16 steps)
)
# messages of a plan this node has not followed yet: held this long, this many and this many bytes at most
HELD_S = 30.0
MAX_HELD = 64
MAX_HELD_BYTES = 256 * 2**20

Context = zmq.Context[zmq.Socket[bytes]]


class _Unassigned(NamedTuple):
    """A message kept until its sender is in the assignment: as it came directly, or through the relay
    (stamp, seal, then the frames)."""

    arrived: float
    sender: bytes
    frames: list[bytes]
    relayed: bool
    size: int


class Received(NamedTuple):
    header: Header
    tensor: torch.Tensor
    sender: bytes | None  # the sending peer's public link key (Z85) on a secured link, else None


def _size(got: Received) -> int:
    """About how many bytes a decoded message holds: its tensor, and about 64 bytes for each value of its
    header's lists (a Python int in a list, a spec's fields, a route's strings)."""
    header = got.header
    values = (
        4 * len(header.request_ids)
        + len(header.token_ids)
        + len(header.preempted)
        + 3 * len(header.finished)
        + sum(8 + len(spec.params.stop_token_ids) for spec in header.new_requests)
        + sum(1 + len(hop) // 8 for hop in header.route)
    )
    return got.tensor.numel() * got.tensor.element_size() + 64 * values


class Outbox:
    """Pushes to the inbox at `endpoint`; on a secured link, only if that inbox holds `server_key`. Given a
    `relay`, it sends through the relay instead, sealed for the holder of `server_key` (`endpoint` unused)."""

    def __init__(
        self,
        context: Context,
        endpoint: str,
        latency_ms: float = 0.0,
        security: LinkSecurity | None = None,
        server_key: bytes | None = None,
        relay: RelayAddress | None = None,
    ) -> None:
        self._socket = context.socket(zmq.PUSH if relay is None else zmq.DEALER)
        self._socket.setsockopt(zmq.LINGER, 1_000)
        self._security = security
        self._receiver = server_key if relay is not None else None
        if security is not None:
            if server_key is None:
                raise ValueError("a secured link needs the key of the inbox it connects to")
            security.client(self._socket, server_key if relay is None else relay.key)
        elif relay is not None:
            raise ValueError("only a secured link can go through a relay")
        self._socket.connect(endpoint if relay is None else relay.endpoint)
        self.latency_s = latency_ms / 1_000
        self._queue: deque[tuple[float, list[bytes]]] = deque()
        self._wake = threading.Condition()
        self._closing = False
        self._sender: threading.Thread | None = None
        if self.latency_s > 0:
            # From here on only the sender thread touches the socket (ZeroMQ sockets are not thread-safe).
            self._sender = threading.Thread(target=self._deliver_when_due, daemon=True)
            self._sender.start()

    def send(self, header: Header, tensor: torch.Tensor) -> None:
        frames = encode(header, tensor)
        if self._receiver is not None:
            assert self._security is not None
            frames = [TO, self._receiver, *self._security.seals.seal(self._receiver, frames), *frames]
        if self._sender is None:
            self._socket.send_multipart(frames)
            return
        with self._wake:
            self._queue.append((time.monotonic() + self.latency_s, frames))
            self._wake.notify()

    def _deliver_when_due(self) -> None:
        while True:
            with self._wake:
                while not self._queue and not self._closing:
                    self._wake.wait()
                if not self._queue:
                    return
                due, frames = self._queue[0]
                wait = due - time.monotonic()
                if wait > 0:
                    self._wake.wait(wait)
                    continue
                self._queue.popleft()
            self._socket.send_multipart(frames)

    def close(self) -> None:
        """Delivers what is queued, then closes."""
        if self._sender is not None:
            with self._wake:
                self._closing = True
                self._wake.notify()
            self._sender.join()
        self._socket.close()


class Inbox:
    """Takes the messages sent to `endpoint` and, given a `relay`, those its peers send through the relay (a
    stage behind NAT binds `endpoint` where only its own driver reaches it)."""

    def __init__(
        self,
        context: Context,
        endpoint: str,
        limits: Limits = DEFAULT_LIMITS,
        security: LinkSecurity | None = None,
        relay: RelayAddress | None = None,
    ) -> None:
        self._socket = context.socket(zmq.PULL)
        self._socket.setsockopt(zmq.MAXMSGSIZE, limits.max_message_bytes)
        # what each connection may queue here while the stage is not reading (ZeroMQ's default is 1,000): an
        # honest peer has at most one step per microbatch in flight
        self._socket.setsockopt(zmq.RCVHWM, RECEIVE_QUEUE)
        self._security = security
        if security is not None:
            security.serve(self._socket)
        self._socket.bind(endpoint)
        self.endpoint = self._socket.getsockopt_string(zmq.LAST_ENDPOINT)
        self.limits = limits
        self.rejected = 0
        self._warn = ThrottledLog(log)  # what strangers and peers make it drop: one line per 10 s per kind
        self._unassigned: deque[_Unassigned] = deque()  # in arrival order
        self._unassigned_bytes = 0
        self._max_unassigned_bytes = max(MAX_UNASSIGNED_BYTES, limits.max_message_bytes)
        self._poller = zmq.Poller()
        self._poller.register(self._socket, zmq.POLLIN)
        self._relay: zmq.Socket[bytes] | None = None
        self._hello_at = 0.0
        self._answered = False
        self._early: deque[Received] = deque()
        self._held: deque[tuple[float, Received]] = deque()  # (when first held, message), oldest first
        self._released: dict[
            int, float
        ] = {}  # id of a message handed back by release_held -> when first held
        self.expired = 0  # held messages dropped unclaimed (too old, too many)
        if relay is not None:
            if security is None:
                raise ValueError("only a secured inbox can take messages through a relay")
            self._relay = context.socket(zmq.DEALER)
            self._relay.setsockopt(zmq.MAXMSGSIZE, limits.max_message_bytes + ENVELOPE_BYTES)
            self._relay.setsockopt(zmq.LINGER, 0)
            security.client(self._relay, relay.key)
            self._relay.connect(relay.endpoint)
            self._poller.register(self._relay, zmq.POLLIN)
            self.announce()

    def announce(self) -> None:
        """Tells the relay (if any) which keys this inbox takes messages from now, and waits for its answer,
        so that what those peers send from now on is delivered. Without an answer in time it logs and goes
        on: the periodic hello tries again."""
        if self._relay is None:
            return
        self._say_hello()
        self._answered = False
        deadline = time.monotonic() + RELAY_ANSWER_S
        while not self._answered and (remaining := deadline - time.monotonic()) > 0:
            if self._relay.poll(int(remaining * 1_000) + 1):
                got = self._relayed(self._relay)
                if got is not None:  # a message that overtook the answer: kept, in order
                    self._early.append(got)
        if not self._answered:
            log.warning("the relay did not answer within %.0f s; trying again", RELAY_ANSWER_S)

    def _say_hello(self) -> None:
        """Tells the relay (again) that this inbox takes its peers' messages, and from which keys."""
        assert self._relay is not None and self._security is not None
        peers = self._security.allowed - {self._security.keys.public}  # its own driver sends directly
        self._relay.send_multipart([HELLO, *sorted(peers)])
        self._hello_at = time.monotonic()

    def receive(self, timeout_ms: int) -> Received | None:
        """The next well-formed message and who sent it, or None if none arrives in time. Malformed ones are
        logged, counted and skipped."""
        if self._early:
            return self._early.popleft()
        deadline = time.monotonic() + timeout_ms / 1_000
        while (remaining := deadline - time.monotonic()) > 0:
            if self._unassigned:
                kept = self._now_assigned()
                if kept is not None:
                    return kept
            if self._relay is not None and time.monotonic() - self._hello_at > HELLO_S:
                self._say_hello()
            ready = dict(self._poller.poll(int(min(remaining, HELLO_S) * 1_000) + 1))
            if self._socket in ready:
                got = self._direct()
            elif self._relay is not None and self._relay in ready:
                got = self._relayed(self._relay)
            else:
                continue
            if got is not None:
                return got
        return None

    def hold(self, got: Received) -> None:
        """Keeps a message the stage cannot take yet (a newer plan's) for the next stage on this inbox; within
        MAX_HELD messages and MAX_HELD_BYTES, the oldest dropped first, each for HELD_S from when it was first
        held (handed back again by a stage of another plan, it keeps that time)."""
        self._held.append((self._released.pop(id(got), time.monotonic()), got))
        while len(self._held) > MAX_HELD or sum(_size(h) for _, h in self._held) > MAX_HELD_BYTES:
            self._held.popleft()
            self.expired += 1
            self._warn.warning(
                "held", "dropped a message of a plan not followed yet on %s: too many held", self.endpoint
            )

    @property
    def held(self) -> int:
        """Messages held for the next stage on this inbox."""
        return len(self._held)

    def release_held(self) -> None:
        """Hands the held messages younger than HELD_S to the next `receive` calls, in the order they came."""
        now = time.monotonic()
        self._released.clear()  # those of the last release not held again were taken
        for held_at, got in self._held:
            if now - held_at <= HELD_S:
                self._early.append(got)
                self._released[id(got)] = held_at
            else:
                self.expired += 1
        self._held.clear()

    def _direct(self) -> Received | None:
        frames = self._socket.recv_multipart(copy=False)
        sender = None
        if self._security is not None:
            # the key the handshake authenticated (ZAP's User-Id), set on every frame of the connection
            sender = str(frames[0].get("User-Id")).encode()
            if not self._taken_now(sender):
                return self._keep_unassigned(sender, [frame.bytes for frame in frames], relayed=False)
        return self._decoded([frame.bytes for frame in frames], sender)

    def _relayed(self, relay: zmq.Socket[bytes]) -> Received | None:
        """A message through the relay: [sender's key, stamp, seal, *frames], taken only if its sender is in
        the assignment and sealed it for this inbox."""
        assert self._security is not None
        frames = [frame.bytes for frame in relay.recv_multipart(copy=False)]
        if frames == [HELLO]:  # the relay's answer to a hello
            self._answered = True
            return None
        if len(frames) < 4:
            return self._reject("a malformed message through the relay", "malformed")
        sender = frames[0]
        if not self._taken_now(sender):
            return self._keep_unassigned(sender, frames[1:], relayed=True)
        return self._unsealed(sender, frames[1:])

    def _unsealed(self, sender: bytes, frames: list[bytes]) -> Received | None:
        """A message through the relay ([stamp, seal, *frames]) if `sender` sealed it for this inbox."""
        assert self._security is not None
        stamp, seal, body = frames[0], frames[1], frames[2:]
        refused = self._security.seals.check(sender, stamp, seal, body)
        if refused is not None:
            return self._reject(f"a message through the relay with {refused}", refused)
        return self._decoded(body, sender)

    def _taken_now(self, sender: bytes) -> bool:
        """Whether a message from `sender` is taken at once: its key is in the assignment and none of its
        messages is kept (those go first)."""
        assert self._security is not None
        return self._security.admits(sender) and not any(k.sender == sender for k in self._unassigned)

    def _keep_unassigned(self, sender: bytes, frames: list[bytes], relayed: bool) -> Received | None:
        """Keeps a message until its sender is in the assignment (None: nothing to take now)."""
        size = len(sender) + sum(len(frame) for frame in frames)  # a hostile relay names any sender
        if (
            len(self._unassigned) >= MAX_UNASSIGNED
            or self._unassigned_bytes + size > self._max_unassigned_bytes
        ):
            return self._reject(NOT_ASSIGNED + " (beyond what is kept)", "unassigned")
        self._unassigned.append(_Unassigned(time.monotonic(), sender, frames, relayed, size))
        self._unassigned_bytes += size
        return None

    def _now_assigned(self) -> Received | None:
        """The oldest kept message whose sender is in the assignment now; drops those kept too long."""
        assert self._security is not None
        for index, kept in enumerate(self._unassigned):
            if self._security.admits(kept.sender):
                del self._unassigned[index]
                self._unassigned_bytes -= kept.size
                if kept.relayed:
                    return self._unsealed(kept.sender, kept.frames)
                return self._decoded(kept.frames, kept.sender)
        now = time.monotonic()
        while self._unassigned and now - self._unassigned[0].arrived > UNASSIGNED_S:
            self._unassigned_bytes -= self._unassigned.popleft().size
            self._reject(NOT_ASSIGNED, "unassigned")
        return None

    def _decoded(self, frames: list[bytes], sender: bytes | None) -> Received | None:
        try:
            header, tensor = decode(frames, self.limits)
        except FrameError as exc:
            return self._reject(f"a malformed message: {exc}", "malformed")
        return Received(header, tensor, sender)

    def _reject(self, what: str, kind: str) -> Received | None:
        """Counts and logs (throttled per `kind`, one of this module's names) a dropped message."""
        self.rejected += 1
        self._warn.warning(kind, "dropped %s on %s", what, self.endpoint)
        return None  # typed as a result so that callers can `return self._reject(...)`

    def close(self) -> None:
        if self._relay is not None:
            self._relay.close(linger=0)
        self._socket.close(linger=0)
