"""Next-token choice on the last stage: greedy, or temperature + top-p with each request's own generator."""

from __future__ import annotations

import torch

from miner.engine.sequence import SamplingParams


def sample(
    logits: torch.Tensor, params: list[SamplingParams], generators: list[torch.Generator]
) -> list[int]:
    """One token per row of `logits` [sequences, vocab]; row i uses `params[i]` and draws from
    `generators[i]` (one stream per request, so its samples do not depend on what it is batched with)."""
    return [_sample_one(row, p, g) for row, p, g in zip(logits, params, generators, strict=True)]


def _sample_one(logits: torch.Tensor, params: SamplingParams, generator: torch.Generator) -> int:
    if params.temperature == 0:
        return int(logits.argmax())
    probs = torch.softmax(logits.float() / params.temperature, dim=-1)
    if params.top_p < 1:
        sorted_probs, order = probs.sort(descending=True)
        # keep the smallest prefix whose mass reaches top_p (the token that crosses it included)
        keep = sorted_probs.cumsum(0) - sorted_probs < params.top_p
        probs = torch.zeros_like(probs).scatter(0, order[keep], sorted_probs[keep])
    return int(torch.multinomial(probs.cpu(), 1, generator=generator))
