"""Next-token choice on the last stage: greedy, or temperature + top-p with each request's own generator."""

from __future__ import annotations

import torch

from miner.engine.sequence import Sequence


def sample(logits: torch.Tensor, sequences: list[Sequence]) -> list[int]:
    """One token per row of `logits` [sequences, vocab]."""
    return [_sample_one(row, seq) for row, seq in zip(logits, sequences, strict=True)]


def _sample_one(logits: torch.Tensor, seq: Sequence) -> int:
    params = seq.params
    if params.temperature == 0:
        return int(logits.argmax())
    probs = torch.softmax(logits.float() / params.temperature, dim=-1)
    if params.top_p < 1:
        sorted_probs, order = probs.sort(descending=True)
        # keep the smallest prefix whose mass reaches top_p (the token that crosses it included)
        keep = sorted_probs.cumsum(0) - sorted_probs < params.top_p
        probs = torch.zeros_like(probs).scatter(0, order[keep], sorted_probs[keep])
    return int(torch.multinomial(probs.cpu(), 1, generator=seq.generator))
