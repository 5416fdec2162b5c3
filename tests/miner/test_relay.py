"""Stage messages through a relay: delivered exactly, with their true sender, to the one inbox they were
sealed for; everything an attacker can send is dropped and logged, never delivered. The attackers are real
sockets: a peer with no CURVE key, a stranger with a key of its own (who may neither take a slot nor queue
messages), a peer its receiver does not take, and a relay that forges, alters, replays and misdirects. The
relay's members are set here as the coordinator's answer would set them."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch
import zmq

from client_sdk.protocol.sampling import SamplingParams
from miner.model.config import ModelConfig
from miner.pipeline.batch import load_tokenizer
from miner.pipeline.processes import StageProcesses, even_split
from miner.transport import frames, link
from miner.transport import relay as relay_module
from miner.transport.frames import Header
from miner.transport.link import Context, Inbox, Outbox, Received
from miner.transport.relay import (
    FORGET_S,
    HELD_FULL,
    HELD_TOO_LONG,
    HELLO,
    NOT_A_MINER,
    NOT_CONNECTED,
    NOT_JOINED,
    NOT_RELAYED,
    NOT_TAKEN,
    TO,
    Relay,
    RelayAddress,
)
from miner.transport.relay_admission import Admission, RelayMembers
from miner.transport.security import LinkKeys, LinkSecurity

LOCAL = "tcp://127.0.0.1:*"


@pytest.fixture
def admission() -> Admission:
    """The relay's members, named by each test with `admit` (nobody until then)."""
    return Admission()


@pytest.fixture
def relay(admission: Admission) -> Iterator[Relay]:
    running = Relay(LinkKeys.generate(), LOCAL, admission)
    thread = threading.Thread(target=running.serve, daemon=True)
    thread.start()
    yield running
    running.stop()
    thread.join()
    running.close()


class Node:
    """One stage's secured context: its keys and the keys it takes messages from."""

    def __init__(self, takes: tuple[Node, ...] = ()) -> None:
        self.keys = LinkKeys.generate()
        self.context: Context = zmq.Context()
        self.security = LinkSecurity(self.context, self.keys)
        self.security.allow(n.keys.public for n in takes)

    def close(self) -> None:
        self.security.stop()
        self.context.destroy(linger=0)

    def inbox(self, relay: RelayAddress) -> Inbox:
        return Inbox(self.context, LOCAL, security=self.security, relay=relay)

    def outbox(self, to: Node, relay: RelayAddress) -> Outbox:
        return Outbox(self.context, "", security=self.security, server_key=to.keys.public, relay=relay)


def admit(admission: Admission, relayed: tuple[Node, ...], senders: tuple[Node, ...]) -> None:
    """The coordinator's answer: `relayed` joined through the relay, `senders` (and they) joined."""
    relayed_keys = frozenset(n.keys.public for n in relayed)
    admission.update(RelayMembers(relayed_keys, relayed_keys | {n.keys.public for n in senders}))


def message(microbatch: int) -> tuple[Header, torch.Tensor]:
    return frames.message(
        "activations",
        microbatch,
        request_ids=(7, 8),
        token_ids=(5, 6),
        route=("a", "b"),
        tensor=torch.randn(2, 16),
    )


def received(inbox: Inbox, count: int, timeout_ms: int = 5_000) -> list[Received]:
    got = []
    for _ in range(count):
        one = inbox.receive(timeout_ms)
        assert one is not None, f"only {len(got)} of {count} messages arrived"
        got.append(one)
    return got


def connected(relay: Relay, count: int) -> None:
    """Waits until `count` relayed inboxes said hello."""
    deadline = time.monotonic() + 5
    while relay.counters.relayed < count and time.monotonic() < deadline:
        time.sleep(0.02)
    assert relay.counters.relayed >= count


def forwarded(relay: Relay, count: int) -> int:
    """The relay's forwarded count once it reaches `count` (or 2 s pass): the relay counts a message after
    handing it to its socket, so a receiver can hold it a moment before the count moves."""
    deadline = time.monotonic() + 2
    while relay.counters.forwarded < count and time.monotonic() < deadline:
        time.sleep(0.01)
    return relay.counters.forwarded


def test_messages_through_the_relay_arrive_exactly_in_order_with_their_sender(
    relay: Relay, admission: Admission
) -> None:
    sender = Node()
    receiver = Node(takes=(sender,))
    admit(admission, relayed=(receiver,), senders=(sender,))
    inbox = receiver.inbox(relay.address)
    connected(relay, 1)
    outbox = sender.outbox(receiver, relay.address)
    sent = [message(m) for m in range(5)]
    try:
        for header, tensor in sent:
            outbox.send(header, tensor)
        got = received(inbox, 5)
        assert [g.header for g in got] == [h for h, _ in sent]
        assert all(torch.equal(g.tensor, t) for g, (_, t) in zip(got, sent, strict=True))
        assert {g.sender for g in got} == {sender.keys.public}
        assert forwarded(relay, 5) == 5 and inbox.rejected == 0
    finally:
        outbox.close()
        inbox.close()
        for node in (sender, receiver):
            node.close()


def test_strangers_and_peers_the_receiver_does_not_take_are_dropped_at_the_relay(
    relay: Relay, admission: Admission, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A peer the receiver's hello does not name waits WAIT_S for a hello that does, then is dropped."""
    monkeypatch.setattr(relay_module, "WAIT_S", 0.5)
    sender, stranger = Node(), Node()  # the stranger is a joined miner, but not the receiver's peer
    receiver = Node(takes=(sender,))
    admit(admission, relayed=(receiver,), senders=(sender, stranger))
    inbox = receiver.inbox(relay.address)
    connected(relay, 1)
    plain = sender.context.socket(zmq.DEALER)  # no CURVE at all: its handshake never completes
    plain.connect(relay.address.endpoint)
    outboxes = [stranger.outbox(receiver, relay.address), sender.outbox(receiver, relay.address)]
    try:
        with caplog.at_level(logging.WARNING):
            plain.send_multipart([TO, receiver.keys.public, b"\0" * 8, b"\0" * 32, b"header", b"payload"])
            outboxes[0].send(*message(1))  # a key the receiver's assignment does not name
            outboxes[1].send(*message(2))
            (only,) = received(inbox, 1)
            assert only.header.microbatch == 2 and only.sender == sender.keys.public
            assert inbox.receive(timeout_ms=300) is None
            wait_until(lambda: relay.counters.dropped == 1)
        assert relay.counters.drops == {NOT_TAKEN: 1}
        assert forwarded(relay, 1) == 1
        assert f"from {stranger.keys.public.decode()} to {receiver.keys.public.decode()}" in caplog.text
    finally:
        plain.close(linger=0)
        for outbox in outboxes:
            outbox.close()
        inbox.close()
        for node in (sender, stranger, receiver):
            node.close()


def test_messages_for_a_stage_that_never_connects_wait_their_time_then_are_dropped() -> None:
    """What comes for a stage before its hello waits FORGET_S at the relay (the oldest first), then goes."""
    clock = [0.0]
    admission = Admission()
    relay = Relay(LinkKeys.generate(), LOCAL, admission)
    thread = threading.Thread(target=relay.serve, args=(lambda: clock[0],), daemon=True)
    thread.start()
    sender, absent, late = Node(), Node(), Node()
    admit(admission, relayed=(absent, late), senders=(sender,))
    outboxes = [sender.outbox(absent, relay.address), sender.outbox(late, relay.address)]
    try:
        outboxes[0].send(*message(1))
        wait_until(lambda: waiting(relay) == 1)
        clock[0] = FORGET_S / 2
        outboxes[1].send(*message(2))
        wait_until(lambda: waiting(relay) == 2)
        clock[0] = FORGET_S + 1  # past the first message's time, not the second's
        outboxes[1].send(*message(3))
        wait_until(lambda: relay.counters.drops.get(NOT_CONNECTED) == 1)
        assert waiting(relay) == 2  # the second stage's two messages still wait
    finally:
        for outbox in outboxes:
            outbox.close()
        for node in (sender, absent, late):
            node.close()
        relay.stop()
        thread.join()
        relay.close()


def waiting(relay: Relay) -> int:
    """Messages the relay holds for stages not connected yet."""
    return sum(len(queue) for queue in relay._waiting.values())


def wait_until(condition: Callable[[], bool], timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_a_message_sealed_for_another_stage_is_not_delivered_to_it(
    relay: Relay, admission: Admission
) -> None:
    """A sender taken by both B and C addresses B; the relay delivers to B only, and C, which takes the same
    sender, sees nothing."""
    sender = Node()
    first, second = Node(takes=(sender,)), Node(takes=(sender,))
    admit(admission, relayed=(first, second), senders=(sender,))
    inboxes = [first.inbox(relay.address), second.inbox(relay.address)]
    connected(relay, 2)
    outbox = sender.outbox(first, relay.address)
    try:
        outbox.send(*message(3))
        assert received(inboxes[0], 1)[0].header.microbatch == 3
        assert inboxes[1].receive(timeout_ms=300) is None
    finally:
        outbox.close()
        for inbox in inboxes:
            inbox.close()
        for node in (sender, first, second):
            node.close()


def test_a_stage_that_stops_reading_loses_its_messages_not_the_relay(
    relay: Relay, admission: Admission
) -> None:
    """A relayed stage that takes nothing (a hostile one, flooded by a peer of its own) fills only its own
    bounded queue at the relay: what comes for it is then dropped and logged, and another stage is still
    served at once."""
    sender = Node()
    stalled, honest = Node(takes=(sender,)), Node(takes=(sender,))
    admit(admission, relayed=(stalled, honest), senders=(sender,))
    dead = stalled.context.socket(zmq.DEALER)  # says hello like an inbox, then never reads
    dead.setsockopt(zmq.RCVHWM, 1)
    dead.setsockopt(zmq.RCVBUF, 4096)
    stalled.security.client(dead, relay.address.key)
    dead.connect(relay.address.endpoint)
    dead.send_multipart([HELLO, sender.keys.public])
    inbox = honest.inbox(relay.address)
    connected(relay, 2)
    flood = sender.context.socket(zmq.DEALER)
    sender.security.client(flood, relay.address.key)
    flood.connect(relay.address.endpoint)
    outbox = sender.outbox(honest, relay.address)
    reason = "a message its receiver could not take"
    try:
        deadline = time.monotonic() + 20
        while reason not in relay.counters.drops and time.monotonic() < deadline:
            with contextlib.suppress(zmq.Again):
                flood.send_multipart(
                    [TO, stalled.keys.public, b"\0" * 8, b"\0" * 32, b"h", bytes(65_536)], zmq.NOBLOCK
                )
        assert reason in relay.counters.drops
        outbox.send(*message(9))
        assert received(inbox, 1, timeout_ms=2_000)[0].header.microbatch == 9
    finally:
        for socket in (dead, flood):
            socket.close(linger=0)
        outbox.close()
        inbox.close()
        for node in (sender, stalled, honest):
            node.close()


def test_a_peer_a_relayed_stage_takes_only_from_its_next_hello_loses_nothing(
    relay: Relay, admission: Admission
) -> None:
    """A new plan's peer may send before the relayed stage's hello names it: its message waits at the relay
    and is delivered once the stage follows the plan and says so."""
    old_peer, new_peer = Node(), Node()
    receiver = Node(takes=(old_peer,))
    admit(admission, relayed=(receiver,), senders=(old_peer, new_peer))
    inbox = receiver.inbox(relay.address)
    connected(relay, 1)
    outbox = new_peer.outbox(receiver, relay.address)
    try:
        outbox.send(*message(4))
        wait_until(lambda: waiting(relay) == 1)
        receiver.security.allow([new_peer.keys.public])  # the stage follows the new plan
        inbox.announce()
        (got,) = received(inbox, 1)
        assert (got.header.microbatch, got.sender) == (4, new_peer.keys.public)
        assert relay.counters.dropped == 0 and inbox.rejected == 0
    finally:
        outbox.close()
        inbox.close()
        for node in (old_peer, new_peer, receiver):
            node.close()


def dealer(node: Node, relay: Relay) -> zmq.Socket[bytes]:
    """A raw socket of `node`'s to the relay, proving `node`'s key: what an attacker would write by hand."""
    socket = node.context.socket(zmq.DEALER)
    node.security.client(socket, relay.address.key)
    socket.connect(relay.address.endpoint)
    return socket


def sealed_for(receiver: bytes) -> list[bytes]:
    return [TO, receiver, b"\0" * 8, b"\0" * 32, b"header", bytes(1_000)]


def held(relay: Relay, count: int) -> None:
    """Waits until `count` messages from keys not looked up yet are held."""
    wait_until(lambda: len(relay._unknown) == count)


def test_strangers_take_no_slot_and_queue_nothing_and_members_are_still_served(
    relay: Relay, admission: Admission, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Keys nobody joined with say hello and send to a member not connected yet and to made-up stages, and a
    joined miner sends to a stage that is not the relay's; once the members are looked up each is dropped for
    what it is, no stranger holds a slot (there are only two) and nothing waits. The member then connects and
    gets its peer's message."""
    monkeypatch.setattr(relay_module, "MAX_RELAYED", 2)
    sender = Node()
    receiver = Node(takes=(sender,))
    admit(admission, relayed=(receiver,), senders=(sender,))
    strangers = [Node() for _ in range(3)]
    sockets = [dealer(stranger, relay) for stranger in strangers]
    joined = dealer(sender, relay)
    try:
        for stranger, socket in zip(strangers, sockets, strict=True):
            socket.send_multipart([HELLO])
            socket.send_multipart(sealed_for(receiver.keys.public))
            socket.send_multipart(sealed_for(stranger.keys.public))
        joined.send_multipart(sealed_for(strangers[0].keys.public))
        held(relay, 10)
        admit(admission, relayed=(receiver,), senders=(sender,))  # the next answer: the same members
        wait_until(lambda: relay.counters.dropped == 10)
        assert relay.counters.drops == {NOT_JOINED: 3, NOT_A_MINER: 6, NOT_RELAYED: 1}
        assert relay.counters.relayed == 0 and waiting(relay) == 0 and relay._unknown_bytes == 0
        inbox = receiver.inbox(relay.address)
        outbox = sender.outbox(receiver, relay.address)
        connected(relay, 1)
        outbox.send(*message(6))
        assert received(inbox, 1)[0].header.microbatch == 6
        outbox.close()
        inbox.close()
    finally:
        for socket in (*sockets, joined):
            socket.close(linger=0)
        for node in (sender, receiver, *strangers):
            node.close()


def test_a_stage_and_a_sender_that_joined_since_the_last_answer_lose_nothing(
    relay: Relay, admission: Admission, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The relay has not heard of either yet: the stage's hello and the sender's messages are held, and the
    next answer naming them delivers all of them, in order, with nothing dropped."""
    monkeypatch.setattr(link, "RELAY_ANSWER_S", 0.1)  # the hello is held: do not wait the full time for it
    sender = Node()
    receiver = Node(takes=(sender,))
    inbox = receiver.inbox(relay.address)
    outbox = sender.outbox(receiver, relay.address)
    try:
        for microbatch in range(3):
            outbox.send(*message(microbatch))
        held(relay, 4)
        admit(admission, relayed=(receiver,), senders=(sender,))
        assert [got.header.microbatch for got in received(inbox, 3)] == [0, 1, 2]
        assert relay.counters.dropped == 0 and forwarded(relay, 3) == 3
    finally:
        outbox.close()
        inbox.close()
        for node in (sender, receiver):
            node.close()


def test_what_unknown_keys_can_make_the_relay_hold_is_bounded(
    relay: Relay, admission: Admission, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Per key no more than MAX_HELD_PER_KEY, in all no more than MAX_HELD: past these, messages from keys
    not looked up yet are dropped at once, not held."""
    monkeypatch.setattr(relay_module, "MAX_HELD", 3)
    monkeypatch.setattr(relay_module, "MAX_HELD_PER_KEY", 2)
    receiver, first, second = Node(), Node(), Node()
    admit(admission, relayed=(receiver,), senders=())
    sockets = [dealer(first, relay), dealer(second, relay)]
    try:
        for _ in range(4):
            sockets[0].send_multipart(sealed_for(receiver.keys.public))
        wait_until(lambda: relay.counters.drops.get(HELD_FULL) == 2)  # its own share is full
        for _ in range(2):
            sockets[1].send_multipart(sealed_for(receiver.keys.public))
        wait_until(lambda: relay.counters.drops.get(HELD_FULL) == 3)  # the relay's is
        assert len(relay._unknown) == 3
        admit(admission, relayed=(receiver,), senders=())
        wait_until(lambda: relay.counters.drops.get(NOT_A_MINER) == 3)
        assert relay._unknown_bytes == 0 and relay._unknown_senders == {}
    finally:
        for socket in sockets:
            socket.close(linger=0)
        for node in (receiver, first, second):
            node.close()


def test_a_message_whose_receiver_is_not_a_key_is_dropped_not_held(relay: Relay) -> None:
    """The receiver frame is not counted in what a held message costs, so it must be a key: a stranger's
    message naming a megabyte as its receiver is dropped at once."""
    stranger = Node()
    socket = dealer(stranger, relay)
    try:
        socket.send_multipart([TO, bytes(2**20), b"\0" * 8, b"\0" * 32, b"header", b"payload"])
        wait_until(lambda: relay.counters.dropped == 1)
        assert relay.counters.drops == {"a message that is neither a hello nor a sealed message": 1}
        assert len(relay._unknown) == 0
    finally:
        socket.close(linger=0)
        stranger.close()


def test_without_an_answer_what_unknown_keys_sent_is_dropped_after_its_time() -> None:
    """The coordinator never answers (a relay that started while it was away): held messages go after
    FORGET_S, so nothing is held for ever."""
    clock = [0.0]
    relay = Relay(LinkKeys.generate(), LOCAL, Admission())
    thread = threading.Thread(target=relay.serve, args=(lambda: clock[0],), daemon=True)
    thread.start()
    sender, receiver = Node(), Node()
    socket = dealer(sender, relay)
    try:
        socket.send_multipart([HELLO])
        socket.send_multipart(sealed_for(receiver.keys.public))
        held(relay, 2)
        clock[0] = FORGET_S + 1
        wait_until(lambda: relay.counters.drops.get(HELD_TOO_LONG) == 2)
        assert relay._unknown_bytes == 0 and relay._unknown_senders == {}
    finally:
        socket.close(linger=0)
        for node in (sender, receiver):
            node.close()
        relay.stop()
        thread.join()
        relay.close()


class HostileRelay:
    """A relay that misbehaves: it proves its key like any relay (the inbox dials it as its relay), records
    what senders send it, and delivers whatever it likes to the inbox that said hello."""

    def __init__(self) -> None:
        self.keys = LinkKeys.generate()
        self.context: Context = zmq.Context()
        self.security = LinkSecurity(self.context, self.keys)
        self.socket = self.context.socket(zmq.ROUTER)
        self.security.serve(self.socket)
        self.socket.bind(LOCAL)
        self.address = RelayAddress(self.socket.getsockopt_string(zmq.LAST_ENDPOINT), self.keys.public)

    def next(self) -> list[bytes]:
        assert self.socket.poll(5_000)
        return self.socket.recv_multipart()

    def close(self) -> None:
        self.socket.close(linger=0)
        self.security.stop()
        self.context.destroy(linger=0)


def test_a_hostile_relay_cannot_forge_alter_replay_or_misdirect(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(link, "RELAY_ANSWER_S", 0.1)  # this relay never answers a hello
    hostile = HostileRelay()
    sender = Node()
    receiver, other = Node(takes=(sender,)), Node(takes=(sender,))
    inbox, other_inbox = receiver.inbox(hostile.address), other.inbox(hostile.address)
    outbox = sender.outbox(receiver, hostile.address)
    try:
        hellos = {}
        for _ in range(2):
            routing, kind, *peers = hostile.next()
            assert kind == HELLO and peers == [sender.keys.public]
            hellos[len(hellos)] = routing
        outbox.send(*message(4))
        routing, kind, target, stamp, seal, *body = hostile.next()
        assert (kind, target) == (TO, receiver.keys.public)
        genuine = [sender.keys.public, stamp, seal, *body]
        header, tensor = message(5)
        forged = [sender.keys.public, stamp, b"\0" * 32, *frames.encode(header, tensor)]
        altered = [*genuine[:3], body[0], bytes(len(body[1]))]
        with caplog.at_level(logging.WARNING):
            for routing_id in hellos.values():  # deliver everything to both inboxes
                for bad in (forged, altered):
                    hostile.socket.send_multipart([routing_id, *bad])
            assert inbox.receive(timeout_ms=500) is None and other_inbox.receive(timeout_ms=300) is None
            for routing_id in hellos.values():
                hostile.socket.send_multipart([routing_id, *genuine])
            (taken,) = [g for g in (inbox.receive(2_000), other_inbox.receive(300)) if g is not None]
            assert taken.header.microbatch == 4 and taken.sender == sender.keys.public
            for routing_id in hellos.values():  # the genuine message again: a replay
                hostile.socket.send_multipart([routing_id, *genuine])
            assert inbox.receive(timeout_ms=500) is None and other_inbox.receive(timeout_ms=300) is None
        assert inbox.rejected == 3  # forged, altered, replayed
        assert other_inbox.rejected == 4  # forged, altered, and twice sealed for another stage
        assert "a seal that does not match" in caplog.text and "a replayed message" in caplog.text
    finally:
        outbox.close()
        inbox.close()
        other_inbox.close()
        for node in (sender, receiver, other):
            node.close()
        hostile.close()


def test_a_pipeline_through_the_relay_serves_the_real_model_exactly_as_a_direct_one(real_model: Path) -> None:
    """SmolLM2 over three stage processes, greedy: the last stage behind NAT, then every stage behind it
    (each link relayed, the ring's return included), token for token the direct pipeline's outputs."""
    tokenizer = load_tokenizer(real_model)
    prompts = [
        tokenizer.encode(text) for text in ("The capital of France is", "def fibonacci(n):", "1, 2, 3,")
    ]
    requests = [(i, prompt, SamplingParams(max_tokens=12)) for i, prompt in enumerate(prompts)]
    splits = even_split(ModelConfig.load(real_model).num_layers, 3)
    outputs = {}
    for relayed in (frozenset(), frozenset({2}), frozenset({0, 1, 2})):
        with StageProcesses(real_model, splits, secured=True, relayed=relayed, threads=1) as pipeline:
            outputs[relayed] = pipeline.run(requests)
            relay = pipeline.relay
            forwarded = relay.counters.forwarded if relay is not None else 0
            dropped = relay.counters.dropped if relay is not None else 0
        assert dropped == 0 and (forwarded > 0) == bool(relayed)
        assert all(report["dropped"] == 0 for report in pipeline.reports)
    direct = outputs[frozenset()]
    assert all(len(tokens) == 12 for tokens in direct.values())
    assert outputs[frozenset({2})] == direct and outputs[frozenset({0, 1, 2})] == direct
