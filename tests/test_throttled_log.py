"""Warnings a peer can cause at will are logged at most once per interval per kind, naming how many were left
out; an inbox flooded with malformed frames by a stranger counts every one and logs one line."""

from __future__ import annotations

import logging

import pytest
import zmq

from client_sdk.throttled_log import ThrottledLog
from miner.transport.link import Inbox


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_each_kind_is_logged_once_per_interval_with_the_count_left_out(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    warn = ThrottledLog(logging.getLogger("throttle-test"), interval_s=10.0, clock=clock)
    with caplog.at_level(logging.WARNING, logger="throttle-test"):
        for i in range(1_000):
            warn.warning("dropped", "dropped frame %d", i)
        warn.warning("stale", "a stale frame")  # another kind is not held back by the first
        clock.now += 9.9
        warn.warning("dropped", "dropped frame %d", 1_000)
        clock.now += 0.2
        warn.warning("dropped", "dropped frame %d", 1_001)
    assert [r.getMessage() for r in caplog.records] == [
        "dropped frame 0",
        "a stale frame",
        "dropped frame 1001 (and 1000 more like it in the last 10 s)",
    ]


def test_a_stranger_flooding_an_inbox_makes_one_line_of_log(caplog: pytest.LogCaptureFixture) -> None:
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    inbox = Inbox(context, "tcp://127.0.0.1:*")
    stranger = context.socket(zmq.PUSH)
    stranger.connect(inbox.endpoint)
    try:
        for _ in range(500):
            stranger.send_multipart([b"\x93garbage", b"1234"])
        with caplog.at_level(logging.WARNING, logger="miner.transport.link"):
            while inbox.rejected < 500:
                assert inbox.receive(timeout_ms=2_000) is None
    finally:
        stranger.close(linger=0)
        inbox.close()
        context.term()
    assert inbox.rejected == 500
    assert len([r for r in caplog.records if r.name == "miner.transport.link"]) == 1
