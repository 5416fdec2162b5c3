"""How a relay learns its members: `keep_fresh` answers an ask soon, and only with an answer read after the
ask; a coordinator that is away leaves the members as they were (and says so once), and before its first
answer answers nothing; whatever a read raises, the loop goes on; a hostile, broken or slow coordinator's
answer (too large, too deep, not keys, not JSON, an error, dripping) is refused, never taken."""

from __future__ import annotations

import http.server
import logging
import re
import threading
from collections.abc import Callable, Iterator

import pytest

from miner.node import relay_members
from miner.node.relay_members import CoordinatorMembers
from miner.transport.relay_admission import Admission, MembersUnavailable, RelayMembers, keep_fresh
from miner.transport.security import LinkKeys
from tests.miner.test_relay import wait_until

A, B = (LinkKeys.generate().public for _ in range(2))


def members(*keys: bytes) -> RelayMembers:
    return RelayMembers(frozenset(keys), frozenset(keys))


def answering_an_ask(admission: Admission) -> RelayMembers:
    """Asks, waits until an update answers the ask, and returns the members it gave."""
    ask = admission.ask()
    wait_until(lambda: admission.view()[1] >= ask)
    return admission.view()[0]


class Coordinator:
    """What the coordinator answers now; `gate`, when set, holds a read until opened."""

    def __init__(self, answer: RelayMembers | None) -> None:
        self.answer: RelayMembers | None = answer
        self.raises: Exception | None = None
        self.reads = 0
        self.gate: threading.Event | None = None
        self.reading = threading.Event()

    def __call__(self) -> RelayMembers:
        self.reads += 1
        self.reading.set()
        if self.gate is not None:
            self.gate.wait(5)
        if self.raises is not None:
            raise self.raises
        if self.answer is None:
            raise MembersUnavailable("the coordinator is away")
        return self.answer


@pytest.fixture
def refreshing() -> Iterator[Callable[[Coordinator], Admission]]:
    stop = threading.Event()
    threads = []

    def start(coordinator: Coordinator) -> Admission:
        admission = Admission()
        thread = threading.Thread(
            target=keep_fresh, args=(admission, coordinator, stop, 60.0, 0.05), daemon=True
        )
        thread.start()
        threads.append(thread)
        return admission

    yield start
    stop.set()
    for thread in threads:
        thread.join(5)


def test_an_ask_is_answered_soon_with_the_members_read_after_it(
    refreshing: Callable[[Coordinator], Admission],
) -> None:
    coordinator = Coordinator(members(A))
    admission = refreshing(coordinator)
    wait_until(lambda: admission.view()[0] == members(A))
    coordinator.answer = members(A, B)  # B joins; nobody asks, so the relay reads again only in 60 s
    assert answering_an_ask(admission) == members(A, B)


def test_a_read_that_began_before_an_ask_does_not_answer_it(
    refreshing: Callable[[Coordinator], Admission],
) -> None:
    coordinator = Coordinator(members(A))
    coordinator.gate = threading.Event()
    admission = refreshing(coordinator)
    wait_until(coordinator.reading.is_set)  # the first read is under way
    ask = admission.ask()  # B's first message comes now; B joined just before
    coordinator.answer = members(A, B)
    coordinator.gate.set()
    wait_until(lambda: admission.view()[1] >= ask)
    assert admission.view()[0] == members(A, B) and coordinator.reads == 2


def test_a_coordinator_that_is_away_leaves_the_members_and_is_reported_once(
    refreshing: Callable[[Coordinator], Admission], caplog: pytest.LogCaptureFixture
) -> None:
    coordinator = Coordinator(members(A))
    with caplog.at_level(logging.WARNING):
        admission = refreshing(coordinator)
        wait_until(lambda: admission.view()[0] == members(A))
        coordinator.answer = None
        for _ in range(3):  # each ask is answered, on what is known
            assert answering_an_ask(admission) == members(A)
        coordinator.answer = members(B)
        assert answering_an_ask(admission) == members(B)
    warnings = [r.getMessage() for r in caplog.records if r.name == "miner.transport.relay_admission"]
    assert warnings == [
        "the relay keeps its members as they were: the coordinator is away",
        "the relay's members are read again",
    ]


def test_before_the_first_answer_no_ask_is_answered(refreshing: Callable[[Coordinator], Admission]) -> None:
    """A relay that starts while the coordinator is away holds what comes rather than dropping it as a
    stranger's: the asks wait for the first answer."""
    coordinator = Coordinator(None)
    admission = refreshing(coordinator)
    ask = admission.ask()
    wait_until(lambda: coordinator.reads >= 3)
    assert admission.view() == (members(), 0)
    coordinator.answer = members(A)
    wait_until(lambda: admission.view()[1] >= ask)
    assert admission.view()[0] == members(A)


def test_whatever_a_read_raises_the_refresher_goes_on(
    refreshing: Callable[[Coordinator], Admission],
) -> None:
    coordinator = Coordinator(members(A))
    admission = refreshing(coordinator)
    wait_until(lambda: admission.view()[0] == members(A))
    coordinator.raises = UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed")
    assert answering_an_ask(admission) == members(A)  # answered on what is known
    coordinator.raises, coordinator.answer = None, members(B)
    assert answering_an_ask(admission) == members(B)


def test_a_fixed_admission_answers_every_ask_at_once() -> None:
    admission = Admission(members(A), fixed=True)
    ask = admission.ask()
    assert admission.view() == (members(A), ask)


class Hostile(http.server.BaseHTTPRequestHandler):
    """A coordinator answering whatever `body` and `status` say."""

    body = b""
    status = 200
    drip_s = 0.0  # a pause before each byte: an answer that never quite ends

    def do_GET(self) -> None:
        self.send_response(self.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        if not self.drip_s:
            self.wfile.write(self.body)
            return
        for byte in self.body:
            threading.Event().wait(self.drip_s)
            self.wfile.write(bytes([byte]))
            self.wfile.flush()

    def log_message(self, *_args: object) -> None:
        pass


@pytest.fixture
def hostile() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hostile)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


KEY = A.decode()


@pytest.mark.parametrize(
    ("status", "body", "refusal"),
    [
        (200, b'{"relayed": ["%s"], "senders": ["%s"]}' % (KEY.encode(), b"_" * 40), "not a link key"),
        (200, b'{"relayed": [1], "senders": []}', "'relayed' is not a list of link keys"),
        (200, b'{"relayed": ["\\ud800"], "senders": []}', "'relayed' is not a list of link keys"),
        (200, b'{"relayed": []}', "'senders' is not a list of link keys"),
        (200, b"[" * 1_000 + b"]" * 1_000, "no members object"),
        (200, b"<html>", "no members object"),
        (200, b'{"relayed": [], "senders": ["%s"]}' % (b"A" * 2_000_000), "answered more than 1000000 bytes"),
        (400, b'{"error": {"message": "key must be a link key", "code": "key"}}', "HTTP 400: key must be"),
        (502, b"bad gateway", "answered HTTP 502"),
    ],
)
def test_a_hostile_or_broken_answer_is_refused(
    hostile: str, status: int, body: bytes, refusal: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(relay_members, "MAX_ANSWER_BYTES", 1_000_000)
    monkeypatch.setattr(Hostile, "status", status)
    monkeypatch.setattr(Hostile, "body", body)
    fetch = CoordinatorMembers(hostile, A)
    try:
        with pytest.raises(MembersUnavailable, match=refusal):
            fetch()
    finally:
        fetch.close()


def test_an_answer_that_drips_is_given_up_at_the_deadline(
    hostile: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(relay_members, "ANSWER_DEADLINE_S", 0.5)
    monkeypatch.setattr(Hostile, "body", b'{"relayed": [], "senders": []}' + b" " * 100)
    monkeypatch.setattr(Hostile, "drip_s", 0.05)
    fetch = CoordinatorMembers(hostile, A)
    try:
        with pytest.raises(MembersUnavailable, match="took over 0 s to answer"):
            fetch()
    finally:
        fetch.close()


def test_an_unreachable_coordinator_is_named() -> None:
    fetch = CoordinatorMembers("http://127.0.0.1:9", A, timeout_s=2)
    try:
        with pytest.raises(
            MembersUnavailable, match=re.escape("cannot reach the coordinator at http://127.0.0.1:9")
        ):
            fetch()
    finally:
        fetch.close()
