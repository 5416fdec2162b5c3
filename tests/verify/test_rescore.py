"""Re-scoring equals Hugging Face transformers' teacher-forced log-probabilities, and an honest greedy output
is the reference argmax at every position."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from transformers import AutoModelForCausalLM

from client_sdk.protocol.sampling import SamplingParams
from miner.verify.rescore import Claim, Rescorer, packed


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


@given(st.lists(st.tuples(st.integers(1, 30), st.integers(1, 30)), max_size=40))
def test_passes_keep_to_both_budgets_and_cut_only_when_one_is_full(lengths: list[tuple[int, int]]) -> None:
    """Each claim is in one pass, in order; a pass over either budget holds one claim; a pass is cut only
    where the next claim would not have fit."""
    claims = [Claim((1,) * p, (2,) * o, SamplingParams()) for p, o in lengths]
    groups = list(packed(list(range(len(claims))), claims, token_budget=40, scored_budget=12))
    assert [i for g in groups for i in g] == list(range(len(claims)))

    def fed(group: list[int]) -> int:
        return sum(p + o - 1 for p, o in (lengths[i] for i in group))

    def scored(group: list[int]) -> int:
        return sum(lengths[i][1] for i in group)

    for group, after in itertools.zip_longest(groups, groups[1:]):
        assert len(group) == 1 or (fed(group) <= 40 and scored(group) <= 12)
        if after:
            assert fed(group + after[:1]) > 40 or scored(group + after[:1]) > 12


def test_scores_do_not_depend_on_batching(
    rescorer: Rescorer, greedy_claims: list[Claim], sampled_claims: list[Claim]
) -> None:
    """A claim scores the same in one pass with greedy and sampled neighbours, in passes cut by either budget
    and alone."""
    claims = [c for pair in zip(greedy_claims, sampled_claims, strict=False) for c in pair]
    together = rescorer.score(claims)
    few_fed = Rescorer(rescorer.shard, page_size=4, token_budget=8).score(claims)
    few_scored = Rescorer(rescorer.shard, page_size=4, scored_budget=3).score(claims)
    alone = [rescorer.score([claim])[0] for claim in claims]
    for a, *others in zip(together, few_fed, few_scored, alone, strict=True):
        for other in others:
            assert [(s.token, s.chosen, s.rank) for s in a] == [(s.token, s.chosen, s.rank) for s in other]
            for field in ("logprob", "gap", "mass_before"):
                assert [getattr(s, field) for s in a] == pytest.approx(
                    [getattr(s, field) for s in other], abs=1e-5
                )
