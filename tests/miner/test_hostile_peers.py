"""Hostile peers against a secured pipeline (CURVE stage links, keys as the coordinator's assignments carry
them). Anyone can reach a stage's published endpoint: a plain socket never completes the CURVE handshake, and
what a CURVE client with a key the assignment does not name sends is dropped before it is decoded; an
authenticated peer cannot send what it is not entitled to (a shutdown from the previous stage is dropped) nor
NaN activations; an outbox pointed at an impostor never delivers. Through all of it the pipeline keeps
serving exactly what it served before."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
import zmq

from miner.node.executor import HeadExecutor
from miner.node.requests import Reader
from miner.node.stage_host import StageHost
from miner.pipeline.stage import StageWorker
from miner.tiny_checkpoint import build_tiny_model
from miner.transport import frames, link
from miner.transport.link import Inbox, Outbox
from miner.transport.security import LinkKeys, LinkSecurity
from tests.miner.nodes import reader_for, stage_hosts
from tests.miner.test_node import TASK, unit_lines

Context = zmq.Context[zmq.Socket[bytes]]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("hostile-model"))


@pytest.fixture(scope="module")
def reader(checkpoint: Path) -> Reader:
    return reader_for(checkpoint)


@pytest.fixture
def context() -> Iterator[Context]:
    ctx: Context = zmq.Context()
    yield ctx
    ctx.destroy(linger=0)


def serve(reader: Reader, head: StageHost) -> dict[int, Any]:
    assert head.driver is not None
    return dict(HeadExecutor(reader).run(TASK, unit_lines(6), head.driver))


def second_stage(hosts: list[StageHost]) -> tuple[StageWorker, str, bytes]:
    """The second stage's worker, its endpoint and its public key."""
    host = hosts[1]
    assert host.worker is not None and host.assignment is not None and host.settings.link_keys is not None
    return host.worker, host.assignment.endpoints[1], host.settings.link_keys.public


def shutdown() -> tuple[frames.Header, torch.Tensor]:
    return frames.message("shutdown")


def nan_activations() -> tuple[frames.Header, torch.Tensor]:
    return frames.message(
        "activations",
        0,
        request_ids=(1,),
        token_ids=(5,),
        route=("a",),
        tensor=torch.full((1, 64), float("nan")),
    )


def settle(seconds: float = 0.5) -> None:
    """Lets the stage's loop take whatever reached it."""
    time.sleep(seconds)


def test_the_secured_pipeline_serves_what_a_plain_one_serves(checkpoint: Path, reader: Reader) -> None:
    with stage_hosts(checkpoint, [(0, 2), (2, 4)]) as plain:
        expected = serve(reader, plain[0])
    with stage_hosts(checkpoint, [(0, 2), (2, 4)], secured=True) as secured:
        assert serve(reader, secured[0]) == expected


def test_strangers_cannot_reach_a_stage(
    checkpoint: Path, reader: Reader, context: Context, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        link, "UNASSIGNED_S", 0.5
    )  # a key no assignment names is kept this long, then dropped
    with stage_hosts(checkpoint, [(0, 2), (2, 4)], secured=True) as hosts:
        before = serve(reader, hosts[0])
        worker, endpoint, server_key = second_stage(hosts)
        plain = context.socket(zmq.PUSH)
        plain.setsockopt(zmq.LINGER, 0)
        plain.connect(endpoint)
        stranger = LinkSecurity(context, LinkKeys.generate())  # a CURVE client whose key no assignment names
        try:
            outbox = Outbox(context, endpoint, security=stranger, server_key=server_key)
            for _ in range(3):
                with contextlib.suppress(zmq.Again):  # no handshake completes, so often nothing is queued
                    plain.send_multipart(frames.encode(*shutdown()), flags=zmq.NOBLOCK)
                outbox.send(*shutdown())
                outbox.send(*nan_activations())
            deadline = time.monotonic() + 10  # the stranger's handshake may take a moment under load
            while worker.inbox.rejected < 6 and time.monotonic() < deadline:
                settle(0.1)
            settle()
            # the plain socket's frames never arrive; the stranger's six are kept unread, then dropped
            assert (worker.dropped, worker.inbox.rejected, worker.stopped) == (0, 6, False)
            assert hosts[1].serving
            assert serve(reader, hosts[0]) == before
            outbox.close()
        finally:
            plain.close()
            stranger.stop()


def test_a_peer_sends_only_what_it_is_entitled_to(checkpoint: Path, reader: Reader, context: Context) -> None:
    """The head is the second stage's previous stage: its activations get in, its shutdown and its NaN
    activations are dropped and counted."""
    with stage_hosts(checkpoint, [(0, 2), (2, 4)], secured=True) as hosts:
        before = serve(reader, hosts[0])
        worker, endpoint, server_key = second_stage(hosts)
        head_keys = hosts[0].settings.link_keys
        assert head_keys is not None
        as_head = LinkSecurity(context, head_keys)
        try:
            outbox = Outbox(context, endpoint, security=as_head, server_key=server_key)
            outbox.send(*shutdown())
            outbox.send(*nan_activations())
            settle()
            assert (worker.dropped, worker.inbox.rejected, worker.stopped) == (1, 1, False)
            assert serve(reader, hosts[0]) == before
            outbox.close()
        finally:
            as_head.stop()


def test_an_outbox_delivers_only_to_the_key_it_was_given(context: Context) -> None:
    """A stage pointed at an endpoint an impostor took (without the real stage's secret key) sends nothing
    to it."""
    real, impostor = LinkKeys.generate(), LinkKeys.generate()
    sender = LinkKeys.generate()
    impostor_side = LinkSecurity(context, impostor)
    impostor_side.allow([sender.public])
    sender_side: LinkSecurity | None = None
    inbox = Inbox(context, "tcp://127.0.0.1:*", security=impostor_side)
    try:
        other: Context = zmq.Context()  # the sender runs on its own node
        sender_side = LinkSecurity(other, sender)
        outbox = Outbox(other, inbox.endpoint, security=sender_side, server_key=real.public)
        outbox.send(*shutdown())
        assert inbox.receive(timeout_ms=1_000) is None
        outbox.close()
        right = Outbox(other, inbox.endpoint, security=sender_side, server_key=impostor.public)
        right.send(*shutdown())  # the same inbox, asked for by its own key: delivered, with the sender's key
        got = inbox.receive(timeout_ms=5_000)
        assert got is not None and got.header.kind == "shutdown" and got.sender == sender.public
        right.close()
        sender_side.stop()
        other.destroy(linger=0)
    finally:
        inbox.close()
        impostor_side.stop()
