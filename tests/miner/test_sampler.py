"""The sampler draws by Gumbel-max with noise fixed by (the request's seed, the token's position, the token
id): a token depends on nothing else (not its batch, not the draws before it, not the device), so a request
resumed at any position draws what it would have drawn uninterrupted and a verifier can tell which token an
honest miner drew; greedy requests take the argmax. The noise function is the protocol of docs/sampling.md:
its test vectors are checked here against the torch implementation and an independent scalar one."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from client_sdk.protocol.sampling import SamplingParams
from miner.engine import gumbel
from miner.engine.sampler import draw, draw_keys, sample, scale, top_p_sets

VOCAB = 64
MASK_32 = 2**32 - 1

# docs/sampling.md, "Test vectors": (seed, position, token) -> (row key, 32-bit hash, g)
VECTORS = [
    (0, 0, 0, 0xA706DD2F4D197E6F, 0x103EE100, -1.0142713777481924),
    (0, 0, 1, 0xA706DD2F4D197E6F, 0xF5E7009A, 3.21282086908779),
    (1, 0, 0, 0x5E41AB087439611E, 0x0E974910, -1.0524897866501761),
    (42, 7, 12345, 0x16062D6C1339E500, 0xB58FD9C2, 1.0683331642591),
    (2**63 - 1, 4096, 49151, 0x462956E59F7190E9, 0x8B5938D0, 0.4972526168057724),
    (123456789, 100, 2**20, 0xF04588BD6DCA9870, 0x97734F34, 0.6445112078055566),
]


def scalar_noise(seed: int, position: int, token: int) -> tuple[int, int, float]:
    """The protocol written out on Python integers, apart from the torch implementation."""

    def fmix32(h: int) -> int:
        h ^= h >> 16
        h = (h * 0x85EBCA6B) & MASK_32
        h ^= h >> 13
        h = (h * 0xC2B2AE35) & MASK_32
        return h ^ (h >> 16)

    key = gumbel.row_key(seed, position)
    hashed = fmix32(fmix32(token ^ (key & MASK_32)) ^ (key >> 32))
    uniform = ((hashed >> 8) + 0.5) / 2**24
    return key, hashed, -math.log(-math.log(uniform))


def logits(rows: int, seed: int = 0, vocab: int = VOCAB) -> torch.Tensor:
    return torch.randn(rows, vocab, generator=torch.Generator().manual_seed(seed))


def test_the_noise_matches_its_test_vectors() -> None:
    for seed, position, token, key, hashed, g in VECTORS:
        assert scalar_noise(seed, position, token) == (key, hashed, pytest.approx(g, abs=1e-12))
        noise = gumbel.noise_of([gumbel.row_key(seed, position)], torch.tensor([token]))
        assert float(noise) == pytest.approx(g, abs=1e-6)


@settings(max_examples=50, deadline=None)
@given(
    seed=st.integers(0, 2**63 - 1),
    position=st.integers(0, 2**20),
    tokens=st.lists(st.integers(0, 2**20), min_size=1, max_size=16),
)
def test_the_torch_noise_is_the_scalar_protocol(seed: int, position: int, tokens: list[int]) -> None:
    key = gumbel.row_key(seed, position)
    noise = gumbel.noise_of([key] * len(tokens), torch.tensor(tokens))
    expected = torch.tensor([scalar_noise(seed, position, t)[2] for t in tokens], dtype=torch.float32)
    assert torch.equal(noise, expected)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")
def test_cuda_draws_the_same_noise_as_the_cpu() -> None:
    keys = [gumbel.row_key(seed, position) for seed, position in ((1, 2), (2**63 - 1, 7), (5, 10**6))]
    tokens = torch.arange(49152)
    cpu = torch.stack([gumbel.noise_of([k] * len(tokens), tokens) for k in keys])
    cuda = torch.stack([gumbel.noise_of([k] * len(tokens), tokens.cuda()) for k in keys])
    assert torch.equal(cpu, cuda.cpu())


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**16),
    temperature=st.sampled_from([0.1, 0.7, 1.0, 2.0]),
    top_p=st.sampled_from([0.05, 0.5, 0.9, 1.0]),
    spread=st.sampled_from([1.0, 10.0, 40.0]),
)
def test_a_draw_is_the_argmax_of_perturbed_scores_over_the_top_p_set(
    seed: int, temperature: float, top_p: float, spread: float
) -> None:
    """The engine computes noise only where it can change the winner: the result must be the full argmax."""
    rows = logits(6, seed, vocab=500) * spread
    params = [SamplingParams(temperature=temperature, top_p=top_p, seed=seed + i) for i in range(6)]
    positions = [seed % 97 + i for i in range(6)]
    keys = draw_keys(params, positions)
    tokens, best = draw(scale(rows, params), params, keys)
    full = scale(rows, params) + torch.stack([gumbel.noise_of([k] * 500, torch.arange(500)) for k in keys])
    sets = top_p_sets(scale(rows, params), [top_p] * 6)
    if sets is not None:
        full = full.masked_fill(~sets, float("-inf"))
    assert torch.equal(tokens, full.argmax(-1))
    assert torch.equal(best, full.max(-1).values)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**16), top_p=st.floats(0.01, 0.999), spread=st.sampled_from([0.1, 1.0, 8.0]))
def test_top_p_sets_are_the_sorted_prefixes_reaching_top_p(seed: int, top_p: float, spread: float) -> None:
    """A partial sort finds the prefix where it is short; flat rows (long prefixes) are sorted whole. A token
    whose mass before it is within float32 rounding of top_p may fall either side (a cumulative sum over a
    partial sort rounds differently from one over the whole row): only the others are compared."""
    scaled = logits(4, seed, vocab=2000) * spread
    sorted_probs, order = scaled.softmax(-1).sort(-1, descending=True)
    before = sorted_probs.cumsum(-1) - sorted_probs
    expected = torch.zeros_like(before, dtype=torch.bool).scatter(-1, order, before < top_p)
    settled = ~torch.zeros_like(expected).scatter(-1, order, (before - top_p).abs() < 1e-5)
    found = top_p_sets(scaled, [top_p] * 4)
    assert found is not None and torch.equal(found & settled, expected & settled)
    mixed = top_p_sets(scaled, [top_p, 1.0, top_p, 1.0])
    assert mixed is not None and mixed[[1, 3]].all()
    assert torch.equal(mixed[[0, 2]] & settled[[0, 2]], expected[[0, 2]] & settled[[0, 2]])


def test_draws_follow_the_distribution() -> None:
    """Gumbel-max draws token t with probability softmax(logits / T)[t]: counted over many positions."""
    row = torch.tensor([[2.0, 1.0, 0.0, -1.0] + [-30.0] * 4])
    draws = 20000
    params = [SamplingParams(temperature=0.5, seed=3)] * draws
    tokens = sample(row.expand(draws, -1), params, list(range(draws)))
    expected = (row[0] / 0.5).softmax(-1)
    counts = torch.bincount(torch.tensor(tokens), minlength=8).float() / draws
    assert torch.allclose(counts, expected, atol=0.01)
    assert counts[4:].sum() == 0


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
def test_row_keys_are_64_bit_and_tell_neighbours_apart(seed: int, position: int) -> None:
    mixed = gumbel.row_key(seed, position)
    assert 0 <= mixed <= gumbel.MASK_64
    assert mixed != gumbel.row_key(seed, position + 1)
    assert mixed != gumbel.row_key(seed ^ 1, position)


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
