"""ZeroMQ links between stages: an Outbox pushes messages to the next stage, an Inbox pulls them in.

With a LinkSecurity both ends speak CURVE (see miner.transport.security): the inbox takes messages only from
allowed keys and tells, for each, which key sent it; the outbox talks only to the holder of the key it was
given.
Without one (a local pipeline of processes on one machine) the links are plain TCP. An Outbox can hold every
message for a fixed one-way latency before it leaves, to emulate a far link in benchmarks (off by default). An
Inbox drops and logs malformed messages and keeps serving.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from typing import NamedTuple

import torch
import zmq

from miner.transport.frames import DEFAULT_LIMITS, FrameError, Header, Limits, decode, encode
from miner.transport.security import LinkSecurity

log = logging.getLogger(__name__)

Context = zmq.Context[zmq.Socket[bytes]]


class Received(NamedTuple):
    header: Header
    tensor: torch.Tensor
    sender: bytes | None  # the sending peer's public link key (Z85) on a secured link, else None


class Outbox:
    """Pushes to the inbox at `endpoint`; on a secured link, only if that inbox holds `server_key`."""

    def __init__(
        self,
        context: Context,
        endpoint: str,
        latency_ms: float = 0.0,
        security: LinkSecurity | None = None,
        server_key: bytes | None = None,
    ) -> None:
        self._socket = context.socket(zmq.PUSH)
        self._socket.setsockopt(zmq.LINGER, 1_000)
        if security is not None:
            if server_key is None:
                raise ValueError("a secured link needs the key of the inbox it connects to")
            security.client(self._socket, server_key)
        self._socket.connect(endpoint)
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
    def __init__(
        self,
        context: Context,
        endpoint: str,
        limits: Limits = DEFAULT_LIMITS,
        security: LinkSecurity | None = None,
    ) -> None:
        self._socket = context.socket(zmq.PULL)
        self._socket.setsockopt(zmq.MAXMSGSIZE, limits.max_header_bytes + limits.max_payload_bytes)
        self._security = security
        if security is not None:
            security.serve(self._socket)
        self._socket.bind(endpoint)
        self.endpoint = self._socket.getsockopt_string(zmq.LAST_ENDPOINT)
        self.limits = limits
        self.rejected = 0

    def receive(self, timeout_ms: int) -> Received | None:
        """The next well-formed message and who sent it, or None if none arrives in time. Malformed ones are
        logged, counted and skipped."""
        deadline = time.monotonic() + timeout_ms / 1_000
        while (remaining := deadline - time.monotonic()) > 0:
            if not self._socket.poll(int(remaining * 1_000) + 1):
                return None
            frames = self._socket.recv_multipart(copy=False)
            sender = None
            if self._security is not None:
                # the key the handshake authenticated (ZAP's User-Id), set on every frame of the connection
                sender = frames[0].get("User-Id").encode()
                if not self._security.admits(sender):
                    self.rejected += 1
                    log.warning("dropped a message on %s from a peer not in the assignment", self.endpoint)
                    continue
            try:
                header, tensor = decode([frame.bytes for frame in frames], self.limits)
                return Received(header, tensor, sender)
            except FrameError as exc:
                self.rejected += 1
                log.warning("dropped a malformed message on %s: %s", self.endpoint, exc)
        return None

    def close(self) -> None:
        self._socket.close(linger=0)
