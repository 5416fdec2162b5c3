"""Messages cross real ZeroMQ sockets in order; malformed ones are dropped without stopping the inbox;
injected latency holds every message back at least that long."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import torch
import zmq

from miner.transport import frames
from miner.transport.frames import Header
from miner.transport.link import Inbox, Outbox


@pytest.fixture
def context() -> Iterator[zmq.Context[zmq.Socket[bytes]]]:
    ctx = zmq.Context()
    yield ctx
    ctx.term()


def message(microbatch: int) -> tuple[Header, torch.Tensor]:
    return frames.message(
        "activations",
        microbatch,
        request_ids=(1, 2),
        token_ids=(5, 6),
        route=("a", "b"),
        tensor=torch.full((2, 4), float(microbatch)),
    )


def test_messages_arrive_in_order_and_bad_ones_are_skipped(context: zmq.Context[zmq.Socket[bytes]]) -> None:
    inbox = Inbox(context, "tcp://127.0.0.1:*")
    outbox = Outbox(context, inbox.endpoint)
    raw = context.socket(zmq.PUSH)
    raw.connect(inbox.endpoint)
    try:
        outbox.send(*message(0))
        got = inbox.receive(timeout_ms=5_000)
        assert got is not None and got[0].microbatch == 0
        raw.send_multipart([b"\x93garbage", b"1234"])  # a peer sending junk
        raw.send_multipart([b"only one frame"])
        outbox.send(*message(1))
        outbox.send(*message(2))
        received = [inbox.receive(timeout_ms=5_000) for _ in range(2)]
        assert [r[0].microbatch for r in received if r is not None] == [1, 2]
        assert received[1] is not None and torch.equal(received[1][1], torch.full((2, 4), 2.0))
        # PULL fair-queues between peers, so the junk may still be in flight: draining counts it too
        assert inbox.receive(timeout_ms=300) is None
        assert inbox.rejected == 2
    finally:
        raw.close(linger=0)
        outbox.close()
        inbox.close()


def test_injected_latency_delays_every_message(context: zmq.Context[zmq.Socket[bytes]]) -> None:
    inbox = Inbox(context, "tcp://127.0.0.1:*")
    outbox = Outbox(context, inbox.endpoint, latency_ms=80)
    try:
        sent = time.monotonic()
        for microbatch in range(3):
            outbox.send(*message(microbatch))
        arrivals = []
        for _ in range(3):
            got = inbox.receive(timeout_ms=5_000)
            assert got is not None
            arrivals.append((got[0].microbatch, time.monotonic() - sent))
        assert [m for m, _ in arrivals] == [0, 1, 2]
        assert all(elapsed >= 0.080 for _, elapsed in arrivals)  # never before its release time
    finally:
        outbox.close()
        inbox.close()
