"""What an authenticated but hostile peer of a stage (the previous stage, the last stage answering the head)
or a stranger can do to it, from a cold review of the stage protocol, each attack kept as a test that it now
fails: frames that passed the wire checks and then killed the stage's thread, tokens that killed the head, a
journal a previous stage could rewrite or grow without bound, log lines per dropped frame, a far-future
session that locked a stage out, held frames that weighed far more than counted, and an unread inbox that
queued whatever a stranger sent."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest
import torch
import zmq

from client_sdk.device import DeviceProfile
from client_sdk.protocol.sampling import SamplingParams
from miner.node.executor import HeadExecutor
from miner.node.journal import Journal, Served
from miner.node.requests import request_id
from miner.node.serve import Node, NodeConfig
from miner.node.stage_host import HostSettings
from miner.pipeline.head import STALL_S, Head
from miner.pipeline.ledger import RequestRecord
from miner.tiny_checkpoint import build_tiny_model
from miner.transport.frames import FrameError, Header, RequestSpec, encode, message
from miner.transport.link import MAX_HELD_BYTES, Inbox, Received, _size
from miner.transport.security import LinkKeys, LinkSecurity
from tests.miner.hostile_frames import CACHE, activations, bare_stage, spec, wire
from tests.miner.nodes import ignore, reader_for
from tests.miner.test_node import CHAIN_ID, HEAD, REGISTRY
from tests.miner.test_protocol import submit

TASK = 7


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("hostile-peers-model"))


def a_head(vocab_size: int | None = None) -> Head:
    head = Head(1, CACHE.local_pages, CACHE.page_size, plan_version=1, vocab_size=vocab_size)
    head.submit(submit({1: ((5, 6, 7), RequestSpec(1, 3, SamplingParams(max_tokens=4)))}))
    return head


def answer(step: Header, tokens: tuple[int, ...], positions: tuple[int, ...] | None = None) -> Header:
    rows = [i for i, flag in enumerate(step.sample) if flag]
    return wire(
        *message(
            "tokens",
            step.microbatch,
            request_ids=tuple(step.request_ids[i] for i in rows),
            positions=positions or tuple(step.positions[i] + step.query_lens[i] for i in rows),
            token_ids=tokens,
            epoch=step.epoch,
        )
    )[0]


def test_tokens_a_last_stage_forges_are_dropped_and_the_step_waits_for_true_ones() -> None:
    head = a_head(vocab_size=128)
    step = head.next_step()
    assert step is not None
    header = step[0]
    for forged in (
        answer(header, (128,)),
        answer(header, (2**64 - 1,)),
        answer(header, (5,), positions=(9,)),
    ):
        with pytest.raises(FrameError):
            head.on_tokens(forged)
    assert head.next_step() is None  # still in flight: nothing changed
    head.on_tokens(answer(header, (5,)))
    assert head.progress() == {1: (5,)}


def test_a_message_that_fails_past_the_checks_does_not_stop_the_stage(
    checkpoint: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with bare_stage(checkpoint, 2, 4, finished_sink=ignore) as (worker, _sink):
        context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        peer = context.socket(zmq.PUSH)
        peer.connect(worker.inbox.endpoint)

        def broken(*_args: object) -> None:
            raise RuntimeError("a failure no check foresaw")

        monkeypatch.setattr(worker, "_run", broken)
        try:
            peer.send_multipart(encode(*activations((1, 5), new_requests=(spec(7),))))
            worker.serve(keep_going=iter([True, False]).__next__, poll_ms=5_000)  # returns: nothing escaped
        finally:
            peer.close(linger=0)
            context.destroy(linger=0)
        assert (worker.dropped, worker.stopped, worker.ledger.records) == (1, False, {})


def node_with(journal: Journal, checkpoint: Path) -> Node:
    config = NodeConfig("tiny", "tcp://127.0.0.1:1", "us-east-1", CHAIN_ID, REGISTRY)
    device = DeviceProfile("cpu", 1.0, 1.0, 1.0, 1.0)
    settings = HostSettings(checkpoint, "tcp://127.0.0.1:1", CACHE)
    return Node(config, HEAD, None, device, settings, HeadExecutor(reader_for(checkpoint)), journal)  # type: ignore[arg-type]


def finished(prompt: tuple[int, ...], output: tuple[int, ...]) -> RequestRecord:
    record = RequestRecord(RequestSpec(0, len(prompt), SamplingParams(max_tokens=8)), [*prompt, *output])
    record.finished = True
    return record


def test_a_previous_stage_can_neither_grow_the_journal_nor_rewrite_a_line(
    checkpoint: Path, tmp_path: Path
) -> None:
    """Finish notices are journaled only for lines of tasks this node took (at most their line count), and a
    line's first record stands, in memory and after a restart."""
    journal = Journal(tmp_path / "served.jsonl")
    node = node_with(journal, checkpoint)
    try:
        node.journal_finished(request_id(TASK, 0), finished((3, 5), (8, 9)))  # a task it never took
        assert journal.served == {}
        journal.accept(TASK, 2)
        node.journal_finished(request_id(TASK, 0), finished((3, 5), (8, 9)))  # served honestly
        node.journal_finished(request_id(TASK, 0), finished((3, 5), (99,)))  # the peer's rewrite
        node.journal_finished(request_id(TASK, 2), finished((3, 5), (1,)))  # past the task's lines
        for task in range(1_000, 1_040):  # lines of tasks no one gave it
            node.journal_finished(request_id(task, 0), finished((1,), (1,)))
    finally:
        node.host.close()
    expected = {(TASK, 0): Served((3, 5), (8, 9), 0)}
    assert journal.served == expected
    reloaded = Journal(journal.path)  # after a restart the node signs from the file
    assert reloaded.served == expected and reloaded.tasks == {TASK: 2}
    assert len(journal.path.read_text().splitlines()) == 2  # the task, and its one line


def test_what_a_peer_makes_a_stage_drop_is_logged_once(
    checkpoint: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with bare_stage(checkpoint, 2, 4, finished_sink=ignore) as (worker, _sink):
        with caplog.at_level(logging.INFO, logger="miner.pipeline.stage"):
            for session in range(1, 301):  # a new session per frame, each freeing the last one's request
                worker.handle(
                    *activations(
                        (1, session),
                        new_requests=(spec(session),),
                        request_ids=(session,),
                        positions=(0,),
                        query_lens=(1,),
                        token_ids=(5,),
                        sample=(False,),
                    )
                )
            for _ in range(300):  # then frames of an ended session
                worker.handle(*activations((1, 1), new_requests=(spec(7),)))
        assert worker.stale == 300
    lines = [r for r in caplog.records if r.name == "miner.pipeline.stage"]
    assert len(lines) <= 2, [r.getMessage() for r in lines]


def test_a_far_future_session_is_refused_and_a_silent_one_gives_way(checkpoint: Path) -> None:
    with bare_stage(checkpoint, 2, 4, finished_sink=ignore) as (worker, _sink):
        worker.handle(*activations((1, 2**64 - 1)))  # a peer's claim, not a head's clock
        assert worker.epoch == (1, 0) and worker.stale == 1
        now = time.time_ns()
        worker.handle(*activations((1, now)))
        assert worker.epoch == (1, now)
        stepped_back = now - 3_600 * 10**9  # a head restarted after its clock went back an hour
        worker.handle(*activations((1, stepped_back)))
        assert worker.epoch == (1, now) and worker.stale == 2  # the session served is alive
        worker._epoch_heard_at -= STALL_S + 1  # ... until it has been silent past the stall time
        worker.handle(*activations((1, stepped_back)))
        assert worker.epoch == (1, stepped_back)


def test_held_frames_are_counted_with_their_headers() -> None:
    """A frame of 4,096 requests and 262,144 token ids holds about 15 MiB of Python objects with no payload at
    all; it is counted so, and the room for frames of a plan not followed yet fills at MAX_HELD_BYTES."""
    ids = tuple(range(4_096))
    header = message(
        "activations",
        request_ids=ids,
        positions=(0,) * len(ids),
        query_lens=(64,) * len(ids),
        token_ids=(1,) * (64 * len(ids)),
        tensor=torch.zeros(64 * len(ids), 0),
    )[0]
    heavy = Received(header, torch.zeros(0), None)
    assert _size(heavy) >= 15 * 2**20
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    inbox = Inbox(context, "tcp://127.0.0.1:*")
    try:
        for _ in range(64):
            inbox.hold(heavy)
        assert inbox.held * _size(heavy) <= MAX_HELD_BYTES and inbox.held < 64
    finally:
        inbox.close()
        context.destroy(linger=0)


def test_an_unread_inbox_queues_little_of_what_a_stranger_sends() -> None:
    """A node between assignments reads nothing; a stranger (any CURVE key completes the handshake) pushing 1
    MiB messages gets only a few dozen queued before its own socket must wait, not ZeroMQ's default 1,000."""
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    keys, stranger = LinkKeys.generate(), LinkKeys.generate()
    security = LinkSecurity(context, keys)
    inbox = Inbox(context, "tcp://127.0.0.1:*", security=security)
    socket = context.socket(zmq.PUSH)
    socket.curve_secretkey, socket.curve_publickey = stranger.secret, stranger.public
    socket.curve_serverkey = keys.public
    socket.setsockopt(zmq.SNDHWM, 1)
    socket.connect(inbox.endpoint)
    sent = 0
    try:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and sent < 1_000:
            try:
                socket.send_multipart([b"h" * 16, b"x" * 2**20], flags=zmq.NOBLOCK)
                sent += 1
            except zmq.Again:
                time.sleep(0.05)
    finally:
        socket.close(linger=0)
        inbox.close()
        security.stop()
        context.destroy(linger=0)
    assert 0 < sent < 100
