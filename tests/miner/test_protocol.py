"""The pipeline protocol without a model: the first stage's Head drives a StageLedger mirror through real wire
messages (encoded and decoded), with microbatch steps coming back in any order, some requests resumed from
output tokens generated before. The mirror's page tables never collide and always fit, preemptions and
finishes free its pages, its per-request records end equal to the Head's prompts and outputs, and the Head's
progress shows each unfinished request's output so far."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from client_sdk.protocol.sampling import SamplingParams
from miner.pipeline.head import Head
from miner.pipeline.ledger import StageLedger
from miner.transport.frames import FrameError, Header, RequestSpec, decode, encode, message

PAGE = 4


def wire(header: Header, tensor: torch.Tensor) -> Header:
    return decode(encode(header, tensor))[0]


def fake_token(request_id: int, position: int) -> int:
    return (request_id * 31 + position * 7) % 101


def answer(header: Header) -> Header:
    """The last stage's tokens for a step: the fake token of each sampled request at its next position."""
    rows = [i for i, flag in enumerate(header.sample) if flag]
    ids = tuple(header.request_ids[i] for i in rows)
    positions = tuple(header.positions[i] + header.query_lens[i] for i in rows)
    tokens = tuple(fake_token(r, p) for r, p in zip(ids, positions, strict=True))
    return wire(
        *message(
            "tokens",
            header.microbatch,
            request_ids=ids,
            positions=positions,
            token_ids=tokens,
            epoch=header.epoch,
        )
    )


def submit(runs: dict[int, tuple[Sequence[int], RequestSpec]]) -> Header:
    """The driver's "submit" message: per request id, its tokens (prompt, then output so far) and its spec."""
    return wire(
        *message(
            "submit",
            request_ids=tuple(runs),
            query_lens=tuple(len(tokens) for tokens, _ in runs.values()),
            token_ids=tuple(t for tokens, _ in runs.values() for t in tokens),
            new_requests=tuple(spec for _, spec in runs.values()),
        )
    )


@settings(max_examples=60, deadline=None)
@given(
    # (prompt length, max_tokens, output tokens it resumes from: fewer than max_tokens)
    requests=st.lists(
        st.tuples(st.integers(1, 20), st.integers(1, 8), st.integers(0, 7)).map(
            lambda r: (r[0], r[1], min(r[2], r[1] - 1))
        ),
        min_size=1,
        max_size=10,
    ),
    pages=st.integers(7, 16),  # 7 pages of 4 tokens hold the longest request (20 + 8)
    microbatches=st.integers(1, 3),
    budget=st.integers(1, 24),
    order=st.randoms(use_true_random=False),
)
def test_a_stage_mirror_stays_in_step_with_the_head(
    requests: list[tuple[int, int, int]], pages: int, microbatches: int, budget: int, order: object
) -> None:
    head = Head(microbatches, pages, PAGE, max_seqs=3, token_budget=budget)
    mirror = StageLedger(microbatches, pages, PAGE)
    prompts = {i: [(i + k) % 50 for k in range(length)] for i, (length, _, _) in enumerate(requests)}
    expected = {
        i: tuple(fake_token(i, length + k) for k in range(new)) for i, (length, new, _) in enumerate(requests)
    }
    runs = {i: prompts[i] + list(expected[i][:resumed]) for i, (_, _, resumed) in enumerate(requests)}
    head.submit(
        submit(
            {
                i: (runs[i], RequestSpec(i, len(prompts[i]), SamplingParams(n)))
                for i, (_, n, _) in enumerate(requests)
            }
        )
    )
    assert head.progress() == {
        i: expected[i][:resumed] for i, (_, _, resumed) in enumerate(requests) if resumed
    }
    in_flight: list[Header] = []
    live: list[dict[int, list[int]]] = [{} for _ in range(microbatches)]  # the mirror's tables per microbatch
    outputs: dict[int, tuple[int, ...]] = {}
    for _ in range(10_000):
        while (step := head.next_step()) is not None:
            in_flight.append(wire(*step))
        if not in_flight:
            break
        header = in_flight.pop(order.randrange(len(in_flight)))  # type: ignore[attr-defined]
        tables = mirror.apply(header)
        tables_now = live[header.microbatch]
        for request_id in [f.request_id for f in header.finished] + list(header.preempted):
            del tables_now[request_id]
        for request_id, table, position, count in zip(
            header.request_ids, tables, header.positions, header.query_lens, strict=True
        ):
            assert len(table) * PAGE >= position + count
            tables_now[request_id] = table
        owned = [page for table in tables_now.values() for page in table]
        assert len(owned) == len(set(owned)) <= pages
        reply = answer(header)
        for request_id, position, token in zip(
            reply.request_ids, reply.positions, reply.token_ids, strict=True
        ):
            mirror.records[request_id].write(position, [token])  # what the last stage records
        for done in head.on_tokens(reply):
            outputs[done.request_id] = done.output
        for request_id, so_far in head.progress().items():
            assert request_id not in outputs and so_far == expected[request_id][: len(so_far)]
    assert head.idle
    assert sorted(outputs) == sorted(prompts)
    assert head.progress() == {}
    assert sorted(mirror.records) == sorted(prompts)
    for request_id, record in mirror.records.items():
        assert record.finished and record.prompt == prompts[request_id]
        assert tuple(record.output) == outputs[request_id] == expected[request_id]
    assert all(blocks.free_pages == pages for blocks in mirror.blocks)


def test_the_head_resumes_a_request_only_from_an_unfinished_output() -> None:
    runs = {  # request id: (prompt + output so far, its spec)
        1: ((1, 2, 3), RequestSpec(1, 4, SamplingParams(4))),  # a prompt longer than the run
        2: ((1, 2, 3), RequestSpec(2, 0, SamplingParams(4))),  # no prompt
        3: ((1, 2, 3, 4, 5), RequestSpec(3, 2, SamplingParams(3))),  # max_tokens of output already
        # an output past its stop token
        4: ((1, 2, 9, 4), RequestSpec(4, 2, SamplingParams(8, stop_token_ids=(9,)))),
        5: ((1, 2, 3, 4), RequestSpec(5, 2, SamplingParams(8))),  # 2 prompt tokens, 2 output tokens so far
    }
    head = Head(1, 8, PAGE)
    head.submit(submit(runs))
    assert list(head.sequences) == [5]
    assert (head.sequences[5].prompt, head.sequences[5].output) == ([1, 2], [3, 4])


def test_a_mirror_rejects_headers_that_do_not_fit() -> None:
    mirror = StageLedger(1, 2, PAGE)
    spec = RequestSpec(1, 5, SamplingParams(4))
    step, _ = message("activations", request_ids=(1,), query_lens=(5,), token_ids=(1, 2, 3, 4, 5))
    with pytest.raises(FrameError, match="request 1 was never introduced"):
        mirror.apply(step)
    with pytest.raises(FrameError, match="microbatch 3 is not one of 1"):
        mirror.apply(message("activations", 3)[0])
    introduced = message(
        "activations", request_ids=(1,), query_lens=(5,), token_ids=(1, 2, 3, 4, 5), new_requests=(spec,)
    )
    assert mirror.apply(introduced[0]) == [[0, 1]]
    with pytest.raises(FrameError, match="tokens at 2 contradict earlier ones"):
        mirror.apply(message("activations", request_ids=(1,), positions=(2,), token_ids=(9,))[0])
    with pytest.raises(FrameError, match="tokens at 9 leave a gap"):
        mirror.apply(message("activations", request_ids=(1,), positions=(9,), token_ids=(9,))[0])
    with pytest.raises(FrameError, match="does not fit in the page pool"):
        mirror.apply(
            message("activations", request_ids=(1,), positions=(5,), query_lens=(4,), token_ids=(6,) * 4)[0]
        )


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def introduce(request_id: int, tokens: int) -> Header:
    """A step feeding a new request's first `tokens` prompt tokens."""
    return message(
        "activations",
        request_ids=(request_id,),
        query_lens=(tokens,),
        token_ids=(1,) * tokens,
        new_requests=(RequestSpec(request_id, tokens, SamplingParams(4)),),
    )[0]


def test_a_head_whose_step_never_comes_back_starts_a_new_session_and_loses_no_token() -> None:
    clock = Clock()
    head = Head(1, 16, PAGE, stall_s=20.0, clock=clock)
    mirror = StageLedger(1, 16, PAGE, clock=clock)
    prompts = {1: [5, 6, 7, 8, 9], 2: [4, 3]}
    head.submit(submit({i: (p, RequestSpec(i, len(p), SamplingParams(6))) for i, p in prompts.items()}))
    for _ in range(3):  # three steps go round
        step = head.next_step()
        assert step is not None
        mirror.apply(wire(*step))
        head.on_tokens(answer(wire(*step)))
    lost = head.next_step()  # the fourth is lost on the way
    assert lost is not None
    clock.now += 20.0
    assert not head.stalled
    clock.now += 0.5
    assert head.stalled
    old = head.epoch
    head.restart()
    assert head.epoch[0] == old[0] and head.epoch[1] > old[1] and not head.stalled
    with pytest.raises(FrameError, match="tokens of session"):
        head.on_tokens(answer(wire(*lost)))  # the lost step's tokens turn up after all: refused
    mirror = mirror.restarted()  # what a stage does when the new session reaches it
    step = head.next_step()
    assert step is not None
    header = wire(*step)
    # every request is fed again from position 0, its three output tokens included
    assert header.epoch == head.epoch and header.positions == (0, 0)
    assert header.query_lens == (len(prompts[1]) + 3, len(prompts[2]) + 3)
    outputs = {}
    while step is not None:
        header = wire(*step)
        mirror.apply(header)
        outputs.update((c.request_id, c.output) for c in head.on_tokens(answer(header)))
        step = head.next_step()
    expected = {i: tuple(fake_token(i, len(p) + k) for k in range(6)) for i, p in prompts.items()}
    assert outputs == expected and head.idle and head.restarts == 1


def test_pages_a_lost_request_holds_are_reused_once_no_header_names_it() -> None:
    clock = Clock()
    mirror = StageLedger(1, 4, PAGE, reclaim_after_s=60.0, clock=clock)
    mirror.apply(introduce(1, 16))  # fills the pool; its head is never heard of again
    clock.now = 60.0
    with pytest.raises(FrameError, match="the step does not fit in the page pool: 1 pages needed, 0 free"):
        mirror.apply(introduce(2, 4))  # refused whole: request 2 is not left open
    clock.now = 60.5
    assert mirror.apply(introduce(3, 4)) == [[0]]
    assert mirror.reclaimed == 1 and sorted(mirror.records) == [3]  # 1 went unnamed for over 60 s


def test_a_peer_cannot_open_more_requests_than_the_pool_has_pages() -> None:
    clock = Clock()
    mirror = StageLedger(2, 4, PAGE, reclaim_after_s=60.0, clock=clock)
    specs = tuple(RequestSpec(i, 1, SamplingParams(4)) for i in range(8))
    mirror.apply(message("activations", new_requests=specs)[0])  # 8 requests opened, none ever fed
    with pytest.raises(FrameError, match="1 new requests: 8 of 8 are open already"):
        mirror.apply(introduce(8, 1))
    clock.now = 61.0
    assert mirror.apply(introduce(9, 1)) == [[0]]
    assert sorted(mirror.records) == [9]
