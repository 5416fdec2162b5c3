"""The sampler seeds each draw by (the request's seed, the token's position): a token depends on nothing else
(not its batch, not the draws before it), so a request resumed at any position draws what it would have drawn
uninterrupted; greedy requests take the argmax."""

from __future__ import annotations

import torch
from hypothesis import given
from hypothesis import strategies as st

from miner.engine.sampler import MASK_64, draw_seed, sample
from miner.engine.sequence import SamplingParams

VOCAB = 64


def logits(rows: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(rows, VOCAB, generator=torch.Generator().manual_seed(seed))


def test_a_draw_depends_only_on_the_seed_and_the_position() -> None:
    rows = logits(3)
    params = [SamplingParams(temperature=1.0, top_p=0.9, seed=seed) for seed in (5, 6, 7)]
    positions = [10, 11, 12]
    together = sample(rows, params, positions)
    alone = [sample(rows[i : i + 1], [params[i]], [positions[i]])[0] for i in range(3)]
    backwards = sample(rows.flip(0), params[::-1], positions[::-1])[::-1]
    assert together == alone == backwards


def test_each_position_and_each_seed_draws_afresh() -> None:
    flat = torch.zeros(200, VOCAB)  # every token equally likely
    first = sample(flat, [SamplingParams(temperature=1.0, seed=1)] * 200, list(range(200)))
    other_seed = sample(flat, [SamplingParams(temperature=1.0, seed=2)] * 200, list(range(200)))
    assert len(set(first)) > VOCAB // 2  # not one draw repeated along the positions
    assert first != other_seed


def test_greedy_takes_the_argmax_whatever_the_seed() -> None:
    rows = logits(4, seed=3)
    params = [SamplingParams(seed=seed) for seed in range(4)]
    assert sample(rows, params, [0, 5, 9, 100]) == rows.argmax(dim=1).tolist()


@given(seed=st.integers(0, 2**63 - 1), position=st.integers(0, 2**32))
def test_draw_seeds_are_64_bit_and_tell_neighbours_apart(seed: int, position: int) -> None:
    mixed = draw_seed(seed, position)
    assert 0 <= mixed <= MASK_64
    assert mixed != draw_seed(seed, position + 1)
    assert mixed != draw_seed(seed ^ 1, position)


def test_greedy_and_sampled_rows_of_one_batch_draw_what_they_draw_alone() -> None:
    rows = logits(4, seed=5)
    params = [
        SamplingParams(),
        SamplingParams(temperature=0.8, seed=3),
        SamplingParams(seed=1),
        SamplingParams(temperature=1.0, top_p=0.5, seed=9),
    ]
    positions = [3, 4, 5, 6]
    together = sample(rows, params, positions)
    assert together == [sample(rows[i : i + 1], [params[i]], [positions[i]])[0] for i in range(4)]
    assert [together[0], together[2]] == [int(rows[0].argmax()), int(rows[2].argmax())]


def test_greedy_takes_the_first_of_tied_maxima() -> None:
    row = torch.zeros(2, VOCAB)
    row[:, [7, 3, 40]] = 2.0
    assert sample(row, [SamplingParams()] * 2, [0, 1]) == [3, 3]
