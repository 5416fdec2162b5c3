"""The pipeline protocol without a model: the first stage's Head drives a StageLedger mirror through real wire
messages (encoded and decoded), with microbatch steps coming back in any order, some requests resumed from
output tokens generated before. The mirror's page tables never collide and always fit, preemptions and
finishes free its pages, its per-request records end equal to the Head's prompts and outputs, and the Head's
progress shows each unfinished request's output so far."""

from __future__ import annotations

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
        wire(
            *message(
                "submit",
                request_ids=tuple(runs),
                query_lens=tuple(len(r) for r in runs.values()),
                token_ids=tuple(t for r in runs.values() for t in r),
                new_requests=tuple(
                    RequestSpec(i, len(prompts[i]), SamplingParams(n)) for i, (_, n, _) in enumerate(requests)
                ),
            )
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
        sampled = [i for i, flag in enumerate(header.sample) if flag]
        positions = tuple(header.positions[i] + header.query_lens[i] for i in sampled)
        ids = tuple(header.request_ids[i] for i in sampled)
        tokens = tuple(fake_token(r, p) for r, p in zip(ids, positions, strict=True))
        for request_id, position, token in zip(ids, positions, tokens, strict=True):
            mirror.records[request_id].write(position, [token])  # what the last stage records
        reply = message("tokens", header.microbatch, request_ids=ids, positions=positions, token_ids=tokens)
        for done in head.on_tokens(wire(*reply)):
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
    head.submit(
        wire(
            *message(
                "submit",
                request_ids=tuple(runs),
                query_lens=tuple(len(run) for run, _ in runs.values()),
                token_ids=tuple(t for run, _ in runs.values() for t in run),
                new_requests=tuple(spec for _, spec in runs.values()),
            )
        )
    )
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
