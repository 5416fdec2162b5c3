"""Seed-synchronized Gumbel noise: g(seed, position, token), the same on every device, batch and stage split.

A sampled token is argmax over the top-p set of logits / temperature + g (the Gumbel-max trick: that argmax is
distributed as softmax(logits / temperature) restricted to the set). Because g depends only on the request's
seed, the token's absolute position and the token id, a verifier with the reference logits can say which token
an honest miner drew, and how far the claimed token is from it. docs/sampling.md is the protocol, with test
vectors; this module is its implementation in torch.

All integer work is on non-negative int64 tensors holding 32-bit values, with every product kept below
2**63, so it is exact on any device (no reliance on signed overflow); only the last step, two logarithms, is
floating point, in float64.
"""

from __future__ import annotations

import math

import torch

MASK_32 = 0xFFFFFFFF
MASK_64 = 2**64 - 1
_FMIX_1 = 0x85EBCA6B  # MurmurHash3's 32-bit finalizer constants
_FMIX_2 = 0xC2B2AE35
_UNIFORM_BITS = 24  # u has 24 bits: exact in float32 as in float64
# The noise's range: u runs from 2**-25 to 1 - 2**-25.
NOISE_MAX = -math.log(-math.log1p(-(2.0**-25)))
_PRUNE_BELOW = NOISE_MAX + 0.01  # with room for float32 rounding of the sums


def row_key(seed: int, position: int) -> int:
    """The 64-bit key of one draw: a mix of the request's seed and the token's absolute position."""
    return splitmix64(splitmix64(seed) ^ position)


def splitmix64(value: int) -> int:
    """SplitMix64's finalizer: nearby inputs (seeds 1, 2, ...; consecutive positions) give unrelated
    outputs."""
    value = (value + 0x9E3779B97F4A7C15) & MASK_64
    value = ((value ^ (value >> 30)) * 0xBF58476D1CE4E5B9) & MASK_64
    value = ((value ^ (value >> 27)) * 0x94D049BB133111EB) & MASK_64
    return value ^ (value >> 31)


def noise_of(keys: list[int], tokens: torch.Tensor) -> torch.Tensor:
    """[rows] float32 noise of one token per row (`tokens` [rows]), one row per draw key."""
    low, high = _key_halves(keys, tokens.device)
    return noise_at(low[:, 0], high[:, 0], tokens)


def noise_at(key_low: torch.Tensor, key_high: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """float32 g = -ln(-ln(u)) for (key, token) pairs given as broadcastable int64 tensors (the key's low
    and high 32 bits, the token id), with u = (the top 24 bits of fmix32(fmix32(token ^ low) ^ high) + 1/2)
    / 2**24."""
    hashed = _fmix32(_fmix32(tokens ^ key_low) ^ key_high)
    uniform = ((hashed >> (32 - _UNIFORM_BITS)).double() + 0.5) / 2**_UNIFORM_BITS
    return (-torch.log(-torch.log(uniform))).float()


def gumbel_max(
    scaled: torch.Tensor, keys: list[int], allowed: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row of `scaled` [rows, vocab] (float32 logits / temperature): the token with the largest
    scaled + g among the `allowed` ones (all when None; the first of ties), and that largest value.

    Noise is computed only where it can matter: a token whose scaled logit is more than the noise's range
    below the top token's perturbed score cannot win, since no g exceeds NOISE_MAX."""
    low, high = _key_halves(keys, scaled.device)
    masked = scaled if allowed is None else scaled.masked_fill(~allowed, float("-inf"))
    top = masked.argmax(-1, keepdim=True)
    floor = masked.gather(-1, top) + noise_at(low, high, top)
    rows, tokens = (masked >= floor - _PRUNE_BELOW).nonzero(as_tuple=True)
    perturbed = torch.full_like(masked, float("-inf"))
    perturbed[rows, tokens] = masked[rows, tokens] + noise_at(low[rows, 0], high[rows, 0], tokens)
    best = perturbed.argmax(-1)
    return best, perturbed.gather(-1, best[:, None])[:, 0]


def _key_halves(keys: list[int], device: torch.device | str) -> tuple[torch.Tensor, torch.Tensor]:
    """[rows, 1] int64 low and high 32 bits of each 64-bit key."""
    halves = torch.tensor([[k & MASK_32, k >> 32] for k in keys], dtype=torch.int64, device=device)
    return halves[:, :1], halves[:, 1:]


def _fmix32(h: torch.Tensor) -> torch.Tensor:
    h = h ^ (h >> 16)
    h = _mul32(h, _FMIX_1)
    h = h ^ (h >> 13)
    h = _mul32(h, _FMIX_2)
    return h ^ (h >> 16)


def _mul32(x: torch.Tensor, constant: int) -> torch.Tensor:
    """x * constant mod 2**32 for 32-bit x, by 16-bit halves of the constant (each product below 2**48)."""
    low = x * (constant & 0xFFFF)
    high = ((x * (constant >> 16)) & 0xFFFF) << 16
    return (low + high) & MASK_32
