"""Re-scoring equals Hugging Face transformers' teacher-forced log-probabilities, and an honest greedy output
is the reference argmax at every position."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM

from miner.verify.rescore import Claim, Rescorer


def hf_logprobs(checkpoint: Path, claim: Claim) -> torch.Tensor:
    """Log-probabilities of the claimed tokens at the request's temperature (1 when greedy), from one
    transformers forward pass over prompt + output."""
    model = AutoModelForCausalLM.from_pretrained(checkpoint, dtype=torch.float32)
    tokens = torch.tensor([list(claim.prompt + claim.output)])
    with torch.no_grad():
        logits = model(tokens).logits[0, len(claim.prompt) - 1 : -1]
    logprobs = torch.log_softmax(logits / (claim.params.temperature or 1.0), dim=-1)
    return logprobs.gather(1, torch.tensor(claim.output)[:, None])[:, 0]


def test_honest_greedy_output_is_the_argmax_everywhere(
    rescorer: Rescorer, greedy_claims: list[Claim]
) -> None:
    scores = rescorer.score(greedy_claims)
    for claim, per_token in zip(greedy_claims, scores, strict=True):
        assert [s.token for s in per_token] == list(claim.output)
        assert all(s.reproduced and s.rank == 0 and s.gap == 0 for s in per_token)


def test_logprobs_equal_transformers_teacher_forcing(
    checkpoint: Path, rescorer: Rescorer, greedy_claims: list[Claim], sampled_claims: list[Claim]
) -> None:
    claims = greedy_claims + sampled_claims
    for claim, per_token in zip(claims, rescorer.score(claims), strict=True):
        ours = torch.tensor([s.logprob for s in per_token])
        torch.testing.assert_close(ours, hf_logprobs(checkpoint, claim), rtol=0, atol=1e-4)


def test_scores_do_not_depend_on_batching(
    rescorer: Rescorer, greedy_claims: list[Claim], sampled_claims: list[Claim]
) -> None:
    """A claim scores the same in one pass with greedy and sampled neighbours, in small passes and alone."""
    claims = [c for pair in zip(greedy_claims, sampled_claims, strict=False) for c in pair]
    together = rescorer.score(claims)
    small_passes = Rescorer(rescorer.shard, page_size=4, token_budget=8).score(claims)
    alone = [rescorer.score([claim])[0] for claim in claims]
    for a, b, c in zip(together, small_passes, alone, strict=True):
        for other in (b, c):
            assert [(s.token, s.chosen, s.rank) for s in a] == [(s.token, s.chosen, s.rank) for s in other]
            for field in ("logprob", "gap", "mass_before"):
                assert [getattr(s, field) for s in a] == pytest.approx(
                    [getattr(s, field) for s in other], abs=1e-5
                )
