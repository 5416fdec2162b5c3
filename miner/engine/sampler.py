"""Next-token choice on the last stage: greedy, or temperature + top-p with a draw seeded per token.

The draw for the token at absolute position p of a request depends only on (the request's seed, p): not on
what the request is batched with, nor on how many tokens this process sampled for it before. So a request
resumed at position p (re-prefilled elsewhere from its token ids) samples what it would have sampled
uninterrupted.
"""

from __future__ import annotations

import torch

from miner.engine.sequence import SamplingParams

MASK_64 = 2**64 - 1


def sample(logits: torch.Tensor, params: list[SamplingParams], positions: list[int]) -> list[int]:
    """One token per row of `logits` [sequences, vocab]; row i uses `params[i]` and is the token at absolute
    position `positions[i]` of its request (prompt and output counted)."""
    tokens = [0] * len(params)
    greedy = [i for i, p in enumerate(params) if p.temperature == 0]
    if greedy:  # one argmax over all greedy rows (the first maximum, as per row)
        rows = logits if len(greedy) == len(params) else logits[greedy]
        for i, token in zip(greedy, rows.argmax(-1).tolist(), strict=True):
            tokens[i] = token
    generator = torch.Generator()  # reseeded before each draw
    for i, p in enumerate(params):
        if p.temperature != 0:
            tokens[i] = _draw(logits[i], p, positions[i], generator)
    return tokens


def draw_seed(seed: int, position: int) -> int:
    """The generator seed of one draw: a 64-bit mix of the request's seed and the token's position."""
    return _splitmix64(_splitmix64(seed) ^ position)


def _splitmix64(value: int) -> int:
    # SplitMix64's finalizer: nearby inputs (seeds 1, 2, ...; consecutive positions) give unrelated outputs
    value = (value + 0x9E3779B97F4A7C15) & MASK_64
    value = ((value ^ (value >> 30)) * 0xBF58476D1CE4E5B9) & MASK_64
    value = ((value ^ (value >> 27)) * 0x94D049BB133111EB) & MASK_64
    return value ^ (value >> 31)


def _draw(logits: torch.Tensor, params: SamplingParams, position: int, generator: torch.Generator) -> int:
    """A temperature (and top-p) draw from one row of logits."""
    probs = torch.softmax(logits.float() / params.temperature, dim=-1)
    if params.top_p < 1:
        sorted_probs, order = probs.sort(descending=True)
        # keep the smallest prefix whose mass reaches top_p (the token that crosses it included)
        keep = sorted_probs.cumsum(0) - sorted_probs < params.top_p
        probs = torch.zeros_like(probs).scatter(0, order[keep], sorted_probs[keep])
    generator.manual_seed(draw_seed(params.seed, position))
    return int(torch.multinomial(probs.cpu(), 1, generator=generator))
