"""A cold review of StageLedger and the stage loop around it, against a hostile previous stage (it holds a
valid link key: its activations are taken as the current epoch's). Every frame here goes through the real
wire encoder and decoder, so each passes `frames.decode`'s checks.

`test_attack_*` passes while the attack works; `test_defended_*` passes while the defence holds. The review
found that a refused frame's finish notices stayed applied (records no sink took, kept by every session: a
memory pile, a poisoned id, a signed record split where the attacker said), that a finish named in another
microbatch held pages past the reclaim, and that max_open could be passed by re-listing reclaimed ids or
feeding finished records. Each is now refused, the ledger checking a step whole before it changes anything
(miner/pipeline/ledger.py); the attacks are kept below as defended tests.

The stage-level tests drive the real `StageWorker.serve` / `handle` / `_in_epoch` / `_run` of a middle stage
(not the head, not the last) with a finished-record sink, as a miner node runs one, on a bare worker: its
forward pass is the identity and its inbox and outbox are in-memory queues.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from types import SimpleNamespace

import pytest
import torch

from client_sdk.protocol.sampling import SamplingParams
from client_sdk.throttled_log import ThrottledLog
from miner.pipeline.ledger import RequestRecord, StageLedger
from miner.pipeline.stage import CacheSettings, StageWorker
from miner.transport.frames import Finished, FrameError, Header, RequestSpec, encode, message
from miner.transport.link import Received
from tests.miner.hostile_frames import HIDDEN, activations, spec, wire
from tests.miner.test_protocol import PAGE, Clock, introduce

log = logging.getLogger(__name__)
BOGUS = 999_999  # an id no header ever introduced
BOS = 1  # the first token of every honest prompt here (as a tokenizer's begin-of-sequence token is)


# ---------------------------------------------------------------------------------------------------------
# a bare middle stage, driven through its real serve loop


class MemoryInbox:
    def __init__(self) -> None:
        self.queue: deque[Received] = deque()
        self.held: list[Received] = []

    def receive(self, timeout_ms: int) -> Received | None:
        return self.queue.popleft() if self.queue else None

    def hold(self, got: Received) -> None:
        self.held.append(got)


class MemoryOutbox:
    def __init__(self) -> None:
        self.sent: list[Header] = []

    def send(self, header: Header, tensor: torch.Tensor) -> None:
        self.sent.append(header)


class Journal:
    """What a node's `journal_finished` keeps: the first record of each request (prompt, output)."""

    def __init__(self) -> None:
        self.lines: dict[int, tuple[tuple[int, ...], tuple[int, ...]]] = {}

    def __call__(self, request_id: int, record: RequestRecord) -> None:
        self.lines.setdefault(request_id, (tuple(record.prompt), tuple(record.output)))


def middle_stage(
    pages: int, microbatches: int = 1, clock: Clock | None = None
) -> tuple[StageWorker, Journal]:
    """A stage between the head and the last, with a finished sink (as every non-head stage of a node)."""
    worker = StageWorker.__new__(StageWorker)
    journal = Journal()
    worker.shard = SimpleNamespace(  # type: ignore[assignment]
        is_first=False,
        is_last=False,
        start=1,
        end=2,
        dtype=torch.float32,
        config=SimpleNamespace(hidden_size=HIDDEN),
    )
    worker.settings = CacheSettings(page_size=PAGE, local_pages=pages, num_microbatches=microbatches)
    worker.ledger = StageLedger(
        microbatches, pages, PAGE, clock=clock if clock is not None else time.monotonic
    )
    worker.finished_sink = journal
    worker.security = None
    worker.head = None
    worker.epoch = (0, 0)
    worker.stale = 0
    worker._epoch_heard_at = time.monotonic()
    worker.inbox = MemoryInbox()  # type: ignore[assignment]
    worker._keys = None  # plain links: the test is the previous stage
    worker._next = MemoryOutbox()  # type: ignore[assignment]
    worker._ring = worker._driver = None
    worker.flood = None
    worker.steps, worker.busy_s, worker.dropped = 0, 0.0, 0
    worker.step_s = deque(maxlen=1_000)
    worker.token_times = deque(maxlen=1_000)
    worker._warn = ThrottledLog(log)
    worker._draining = worker.stopped = False
    worker._forward = lambda header, inputs, tables: inputs  # type: ignore[method-assign]
    return worker, journal


def deliver(worker: StageWorker, *frames: tuple[Header, torch.Tensor]) -> None:
    """Hands `frames` to the stage's real serve loop, as its inbox would, and runs it until they are taken."""
    inbox = worker.inbox
    assert isinstance(inbox, MemoryInbox)
    inbox.queue.extend(Received(h, t, None) for h, t in frames)
    worker.serve(keep_going=lambda: bool(inbox.queue), poll_ms=0)


def sent(worker: StageWorker) -> list[Header]:
    outbox = worker._next
    assert isinstance(outbox, MemoryOutbox)
    return outbox.sent


def honest_step(
    epoch: tuple[int, int], request_id: int, prompt: tuple[int, ...], microbatch: int = 0
) -> tuple[Header, torch.Tensor]:
    """An honest head's first step of a request: its whole prompt from position 0."""
    return activations(
        epoch,
        microbatch,
        request_ids=(request_id,),
        query_lens=(len(prompt),),
        token_ids=prompt,
        sample=(True,),
        new_requests=(spec(request_id, len(prompt)),),
    )


def finish_then_fail(
    epoch: tuple[int, int], done: tuple[Finished, ...], **more: object
) -> tuple[Header, torch.Tensor]:
    """A frame whose finished notices apply, and which then fails on a request nobody introduced: the frame
    is dropped after `finished` changed the ledger, so the stage never hands those records to its sink."""
    return activations(epoch, finished=done, request_ids=(BOGUS,), token_ids=(0,), **more)


def wire_size(frame: tuple[Header, torch.Tensor]) -> int:
    """The bytes a frame takes on the link: its header and its payload."""
    return sum(len(part) for part in encode(*frame))


# ---------------------------------------------------------------------------------------------------------
# Finding 1: a frame that fails after its `finished` notices leaves finished records no sink ever gets;
# `restarted()` keeps them through every later session, `_reclaim` never frees them.


def test_defended_a_failing_frame_applies_none_of_its_finish_notices() -> None:
    stage, journal = middle_stage(pages=8)
    epoch = (0, 1)
    deliver(stage, activations(epoch, new_requests=(spec(7),)))  # opened, no token, no page
    deliver(stage, finish_then_fail(epoch, (Finished(7, 0, BOS),)))
    assert stage.dropped == 1, "the frame was dropped as breaking the protocol..."
    record = stage.ledger.records[7]
    assert not record.finished and record.tokens == [], "...and none of it was applied"
    assert 7 not in journal.lines and 7 in stage.ledger._named, "still open: reclaimable"
    deliver(stage, activations((0, 2)))  # a new session forgets it
    assert stage.epoch == (0, 2) and not stage.ledger.records


def test_defended_a_poisoned_id_refuses_no_later_honest_step() -> None:
    """Request ids are predictable (task << 32 | line). The attacker tries to finish a line's id with a token
    that is not its prompt's first one, in a frame that fails: nothing of it is applied, so every later
    session's honest step that feeds that line goes through."""
    clock = Clock()
    stage, _ = middle_stage(pages=16, clock=clock)
    victim = (5 << 32) | 3
    deliver(stage, activations((0, 1), new_requests=(spec(victim),)))
    deliver(stage, finish_then_fail((0, 1), (Finished(victim, 0, 4242),)))
    for session in range(2, 8):  # each a new session of the head
        clock.now += 3_600.0
        before = len(sent(stage))
        both = activations(
            (0, session),
            request_ids=(11, victim),
            query_lens=(2, 3),
            token_ids=(BOS, 2, BOS, 5, 6),
            sample=(True, True),
            new_requests=(spec(11, 2), spec(victim, 3)),
        )
        deliver(stage, both)
        assert len(sent(stage)) == before + 1, f"session {session}: the honest step went through"
    assert stage.dropped == 1, "only the attacker's frame"


def test_defended_a_later_session_s_request_keeps_its_own_spec() -> None:
    """The attacker's record of a line's id (its own prompt length and sampling) is an unfinished record of
    its session; its finish notice is refused with the frame that carries it, and the next session drops the
    record, so the honest request is recorded, journaled and signed as the honest head sent it."""
    stage, journal = middle_stage(pages=16)
    victim = (5 << 32) | 4
    evil = RequestSpec(victim, 1, SamplingParams(max_tokens=1, temperature=1.5, seed=12345))
    deliver(stage, activations((0, 1), new_requests=(evil,)))
    deliver(stage, finish_then_fail((0, 1), (Finished(victim, 0, BOS),)))
    deliver(stage, honest_step((0, 2), victim, (BOS, 8, 9, 10)))  # a later session's honest request
    assert sent(stage)[-1].epoch == (0, 2)
    record = stage.ledger.records[victim]
    assert record.spec == spec(victim, 4) and not record.finished, "the honest spec"
    deliver(stage, activations((0, 2), request_ids=(victim,), positions=(4,), token_ids=(20,)))
    deliver(stage, activations((0, 2), finished=(Finished(victim, 5, 21),)))
    assert journal.lines[victim] == ((BOS, 8, 9, 10), (20, 21)), "prompt and output as the head sent them"


def test_defended_refused_frames_pile_up_no_finished_records() -> None:
    """Each frame names finish notices for the requests the previous one opened, opens as many more (within
    max_open), then fails: refused whole, it leaves no finished record behind, so nothing piles up for the
    plan (a pile of about 15 times the bytes sent, for ever, before)."""
    pages = 512
    stage, journal = middle_stage(pages=pages)
    epoch = (0, 1)
    previous: tuple[int, ...] = ()
    for k in range(40):
        ids = tuple(range(k * pages + 1, (k + 1) * pages + 1))
        frame = finish_then_fail(
            epoch,
            tuple(Finished(i, 0, BOS) for i in previous),
            new_requests=tuple(spec(i) for i in ids),
        )
        deliver(stage, frame)
        previous = ids
    assert stage.dropped == 40 and not stage.ledger.records and not journal.lines
    deliver(stage, activations((0, 2)))
    assert not stage.ledger.records


def test_defended_a_stage_with_a_sink_carries_no_records_into_a_new_session() -> None:
    """What a new session copies (`restarted()` keeps finished records) is empty on a stage with a sink: each
    finished record is handed on as its finish notice is applied, so a tiny frame claiming a new session costs
    nothing in proportion to what the stage served."""
    stage, journal = middle_stage(pages=8)
    for i in range(20):
        deliver(stage, honest_step((0, 1), i, (BOS, 2)))
        deliver(stage, activations((0, 1), finished=(Finished(i, 2, 3),)))
    assert len(journal.lines) == 20 and not stage.ledger.records and not stage.ledger._microbatch_of
    deliver(stage, activations((0, 2)))
    assert stage.epoch == (0, 2) and not stage.ledger.records


# ---------------------------------------------------------------------------------------------------------
# Finding 2: a finish notice frees pages only in the microbatch its header names, but forgets the request
# everywhere: pages it holds in another microbatch are held until the session ends, past the 60 s reclaim.


def test_defended_a_finish_named_in_another_microbatch_is_refused() -> None:
    clock = Clock()
    ledger = StageLedger(2, 4, PAGE, reclaim_after_s=60.0, clock=clock)
    ledger.apply(introduce(1, 16))  # microbatch 0's whole pool
    with pytest.raises(FrameError, match="request 1 is not of microbatch 1"):
        ledger.apply(message("activations", 1, finished=(Finished(1, 16, 0),))[0])
    assert 1 in ledger._named, "still open, so reclaimable"
    clock.now = 61.0
    assert ledger.apply(introduce(2, 4)) == [[0]] and ledger.reclaimed == 1


# ---------------------------------------------------------------------------------------------------------
# Finding 3: max_open counts only new requests, against the records as they were before `_check_room`
# reclaimed; ids it reclaims, listed again in the same header, are opened uncounted. Finished records fed
# again re-open without being counted either.


def test_defended_relisting_reclaimed_ids_counts_them_as_new() -> None:
    clock = Clock()
    ledger = StageLedger(1, 4, PAGE, reclaim_after_s=60.0, clock=clock)
    first = tuple(RequestSpec(i, 1, SamplingParams(4)) for i in range(4))
    ledger.apply(message("activations", new_requests=first)[0])  # max_open (4) open
    clock.now = 61.0
    lost = tuple(RequestSpec(i, 1, SamplingParams(4)) for i in range(4))
    fresh = tuple(RequestSpec(1_000 + i, 1, SamplingParams(4)) for i in range(4))
    with pytest.raises(FrameError, match="8 new requests: 0 of 4 are open already"):
        ledger.apply(message("activations", new_requests=lost + fresh)[0])
    assert len(ledger._named) <= ledger.max_open
    assert ledger.apply(introduce(77, 1)) == [[0]], "an honest request fits"


def test_defended_feeding_a_finished_record_is_refused() -> None:
    """Finished records (a stage without a sink keeps them all) cannot be fed again, so they never re-open
    past max_open."""
    ledger = StageLedger(1, 4, PAGE)
    for i in range(12):  # honest requests served and finished
        ledger.apply(introduce(i, 1))
        ledger.apply(message("activations", finished=(Finished(i, 1, 5),))[0])
    ids = tuple(range(4))
    with pytest.raises(FrameError, match="request 0 has finished"):
        ledger.apply(message("activations", request_ids=ids, positions=(1,) * 4, token_ids=(5,) * 4)[0])
    assert not ledger._named
    assert ledger.apply(introduce(50, 1)) == [[0]]


def test_defended_a_peer_cannot_append_output_to_a_finished_record() -> None:
    """A stage without a sink (miner.pipeline.processes, whose report lists every record) keeps finished
    records: feeding one again is refused, so its output stays what was finished."""
    ledger = StageLedger(1, 8, PAGE)
    ledger.apply(introduce(3, 2))
    ledger.apply(message("activations", finished=(Finished(3, 2, 9),))[0])
    with pytest.raises(FrameError, match="request 3 has finished"):
        ledger.apply(
            message("activations", request_ids=(3,), positions=(3,), query_lens=(3,), token_ids=(6, 6, 6))[0]
        )
    assert ledger.records[3].finished and ledger.records[3].output == [9]
    with pytest.raises(FrameError, match="request 3 has finished: it cannot be introduced again"):
        ledger.apply(introduce(3, 2))


# ---------------------------------------------------------------------------------------------------------
# Defences that held


def test_defended_a_flood_past_max_open_is_refused_whole_and_leaves_nothing() -> None:
    ledger = StageLedger(2, 4, PAGE)
    flood = tuple(RequestSpec(i, 1, SamplingParams(4)) for i in range(9))
    header = message("activations", request_ids=(0,), token_ids=(1,), new_requests=flood)[0]
    with pytest.raises(FrameError, match="9 new requests"):
        ledger.apply(header)
    assert not ledger.records and not ledger._named and ledger.blocks[0].free_pages == 4


def test_defended_repeated_and_unfed_new_requests_are_counted_once_each() -> None:
    ledger = StageLedger(1, 4, PAGE)
    twice = tuple(RequestSpec(i % 2, 1, SamplingParams(4)) for i in range(8))  # ids 0, 1 four times each
    ledger.apply(message("activations", new_requests=twice)[0])
    assert sorted(ledger._named) == [0, 1]
    unfed = tuple(RequestSpec(10 + i, 1, SamplingParams(4)) for i in range(3))  # named nowhere else
    with pytest.raises(FrameError, match="3 new requests"):
        ledger.apply(message("activations", new_requests=unfed)[0])


def test_defended_finished_and_preempted_notices_of_unknown_ids_change_nothing() -> None:
    ledger = StageLedger(1, 4, PAGE)
    ledger.apply(introduce(1, 4))
    ledger.apply(message("activations", preempted=(2**64 - 1, 5, 5))[0])
    with pytest.raises(FrameError, match="never introduced"):
        ledger.apply(message("activations", finished=(Finished(2**64 - 1, 0, 0),))[0])
    assert list(ledger.records) == [1] and ledger.blocks[0].block_table(1) == [0]


def test_defended_huge_ids_and_positions_cost_nothing() -> None:
    ledger = StageLedger(1, 4, PAGE)
    big = 2**64 - 1
    ledger.apply(introduce(big, 2))
    with pytest.raises(FrameError, match="leave a gap"):
        ledger.apply(message("activations", request_ids=(big,), positions=(big,), token_ids=(1,))[0])
    with pytest.raises(FrameError, match="leave a gap"):
        ledger.apply(message("activations", finished=(Finished(big, big, big),))[0])
    assert ledger.records[big].tokens == [1, 1]


def test_defended_a_step_that_would_run_out_of_pages_is_refused_whole() -> None:
    ledger = StageLedger(1, 4, PAGE)
    header = message(
        "activations",
        request_ids=(1, 2),
        query_lens=(8, 12),
        token_ids=(1,) * 20,
        new_requests=(RequestSpec(1, 8, SamplingParams(4)), RequestSpec(2, 12, SamplingParams(4))),
    )[0]
    with pytest.raises(FrameError, match="the step does not fit in the page pool: 5 pages needed, 4 free"):
        ledger.apply(header)
    assert ledger.blocks[0].free_pages == 4 and not ledger._named and not ledger.records
    assert ledger.apply(introduce(3, 16)) == [[0, 1, 2, 3]]


def test_defended_contradicting_tokens_refuse_the_step_whole() -> None:
    stage, _ = middle_stage(pages=8)
    deliver(stage, honest_step((0, 1), 1, (BOS, 2)), honest_step((0, 1), 2, (BOS, 3)))
    clash = activations(
        (0, 1), request_ids=(1, 2), positions=(2, 0), query_lens=(1, 1), token_ids=(4, 9), sample=(True, True)
    )
    deliver(stage, clash)  # request 2 contradicts its prompt: request 1 does not get its token either
    assert stage.dropped == 1 and stage.ledger.records[1].tokens == [BOS, 2]
    deliver(stage, activations((0, 2)))
    assert not stage.ledger.records, "a new session forgets every unfinished record"


def test_defended_a_failure_past_the_checks_restarts_the_ledger_without_stopping() -> None:
    stage, _ = middle_stage(pages=8)
    deliver(stage, honest_step((0, 1), 1, (BOS, 2)))

    def broken(header: Header, inputs: torch.Tensor, tables: list[list[int]]) -> torch.Tensor:
        raise RuntimeError("a device assert")

    stage._forward = broken  # type: ignore[method-assign]
    deliver(stage, honest_step((0, 1), 2, (BOS, 3)))
    assert stage.dropped == 1 and not stage.stopped and not stage.ledger.records


def test_defended_wrong_hidden_shape_is_refused_before_the_ledger() -> None:
    stage, _ = middle_stage(pages=8)
    frame = wire(
        *message(
            "activations",
            request_ids=(1,),
            query_lens=(2,),
            token_ids=(BOS, 2),
            new_requests=(spec(1, 2),),
            tensor=torch.zeros(2, HIDDEN + 1),
            epoch=(0, 1),
        )
    )
    deliver(stage, frame)
    assert stage.dropped == 1 and not stage.ledger.records
