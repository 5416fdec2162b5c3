"""The verification policy: each rule on hand-made scores, then honest outputs of our engine passing and each
corruption kind failing on real re-scorings."""

from __future__ import annotations

import functools
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from client_sdk.protocol.sampling import SamplingParams
from miner.verify.corrupt import corrupt
from miner.verify.policy import DEFAULT_TOLERANCES, LineStats, Tolerances, judge, verify
from miner.verify.rescore import Claim, Rescorer, TokenScore
from tests.verify.honest import generate

STOP = 3
TOLERANCES = Tolerances(logit_gap=0.5, top_p_slack=0.05)


def score(token: int = 1, chosen: int = 1, gap: float = 0.0, mass_before: float = 0.0) -> TokenScore:
    return TokenScore(token, chosen, gap, logprob=-1.0, rank=int(gap > 0), mass_before=mass_before)


GREEDY = SamplingParams(max_tokens=3, stop_token_ids=(STOP,))
SAMPLED = SamplingParams(max_tokens=3, temperature=0.7, top_p=0.9, stop_token_ids=(STOP,))


@pytest.mark.parametrize(
    ("output", "reason"),
    [([1, 1, 1, 1], "too_long"), ([1, STOP, 1], "past_stop"), ([1, 1], "truncated"), ([], "truncated")],
)
def test_structure(output: list[int], reason: str) -> None:
    verdict = verify(output, GREEDY, [score() for _ in output], TOLERANCES)
    assert (verdict.passed, verdict.reason) == (False, reason)


def test_finished_outputs_pass_structure() -> None:
    assert verify([1, 1, 1], GREEDY, [score()] * 3, TOLERANCES).passed
    assert verify([1, STOP], GREEDY, [score(), score(STOP, STOP)], TOLERANCES).passed


def test_greedy_gap_within_epsilon_passes_and_beyond_fails_at_its_position() -> None:
    near = [score(), score(2, 1, gap=0.49), score()]
    assert verify([1, 2, 1], GREEDY, near, TOLERANCES).passed
    far = [score(), score(), score(2, 1, gap=0.51)]
    verdict = verify([1, 1, 2], GREEDY, far, TOLERANCES)
    assert (verdict.passed, verdict.reason, verdict.position) == (False, "greedy_gap", 2)
    assert verdict.gap == pytest.approx(0.51)


def test_sampled_token_must_be_inside_the_widened_top_p_set() -> None:
    inside = [score(mass_before=0.5), score(mass_before=0.94), score()]
    assert verify([1, 1, 1], SAMPLED, inside, TOLERANCES).passed
    outside = [score(), score(mass_before=0.96), score()]
    verdict = verify([1, 1, 1], SAMPLED, outside, TOLERANCES)
    assert (verdict.reason, verdict.position, verdict.mass_before) == ("outside_top_p", 1, 0.96)


def test_sampled_token_must_score_within_epsilon_of_the_perturbed_best() -> None:
    near = [score(), score(2, 1, gap=0.49), score(3, 1, gap=-2.0)]  # negative: it scores above the best
    assert verify([1, 2, 3], SAMPLED, near, TOLERANCES).passed
    far = [score(), score(2, 1, gap=0.51), score()]
    verdict = verify([1, 2, 1], SAMPLED, far, TOLERANCES)
    assert (verdict.passed, verdict.reason, verdict.position) == (False, "sampled_gap", 1)


def test_line_stats_count_the_tokens_not_reproduced_and_their_clipped_gaps() -> None:
    scores = [score(), score(2, 1, gap=0.2), score(3, 1, gap=-1.0), score(4, 1, gap=0.9)]
    verdict = verify([1, 2, 3, 4], SamplingParams(max_tokens=4, temperature=1.0), scores, TOLERANCES)
    assert verdict.reason == "sampled_gap"
    assert verdict.stats == LineStats(tokens=4, mismatches=3, gap_sum=pytest.approx(0.2 + 0.0 + 0.5))


def test_honest_outputs_pass(
    rescorer: Rescorer, greedy_claims: list[Claim], sampled_claims: list[Claim]
) -> None:
    verdicts = judge(rescorer, greedy_claims + sampled_claims)
    assert all(v.passed for v in verdicts), verdicts


def test_a_token_outside_the_vocabulary_fails_without_failing_the_others(
    rescorer: Rescorer, greedy_claims: list[Claim]
) -> None:
    vocab = rescorer.shard.config.vocab_size
    bad = Claim(greedy_claims[0].prompt, (*greedy_claims[0].output[:-1], vocab), greedy_claims[0].params)
    verdicts = judge(rescorer, [bad, *greedy_claims[1:]])
    assert verdicts[0].reason == "invalid_token"
    assert all(v.passed for v in verdicts[1:])


@pytest.mark.parametrize("kind", ["substitute", "truncate", "other_checkpoint", "wrong_temperature"])
def test_each_corruption_of_greedy_outputs_fails(
    kind: str, checkpoint: Path, other_checkpoint: Path, rescorer: Rescorer, greedy_claims: list[Claim]
) -> None:
    model = other_checkpoint if kind == "other_checkpoint" else checkpoint
    prompts = [list(c.prompt) for c in greedy_claims]
    params = [c.params for c in greedy_claims]
    outputs = corrupt(
        kind,
        prompts,
        params,
        [c.output for c in greedy_claims],
        vocab_size=rescorer.shard.config.vocab_size,
        rng=random.Random(0),
        generate=lambda p, sp: [list(c.output) for c in generate(model, p, sp)],
    )
    claims = [Claim(c.prompt, tuple(o), c.params) for c, o in zip(greedy_claims, outputs, strict=True)]
    for claim, scores in zip(claims, rescorer.score(claims), strict=True):
        assert not verify(claim.output, claim.params, scores).passed, claim


@functools.cache
def sampled_honestly(model: Path) -> list[Claim]:
    """Six sampled lines of 48 tokens (no stop token), generated once per model for every corruption kind."""
    prompts = [[11 + i, 40, 7 * i + 1] for i in range(6)]
    params = [
        SamplingParams(max_tokens=48, temperature=1.0, top_p=(0.9, 1.0)[i % 2], seed=i) for i in range(6)
    ]
    return generate(model, prompts, params)


def sampled_corruptions_fail(kind: str, honest_model: Path, corrupt_model: Path, rescorer: Rescorer) -> None:
    """Six sampled lines of 48 tokens (no stop token) and their corruptions: every honest one passes, every
    corrupted one that differs from the honest one fails (another rule can draw the very same tokens: then
    nothing was corrupted)."""
    honest = sampled_honestly(honest_model)
    prompts, params = [list(c.prompt) for c in honest], [c.params for c in honest]
    outputs = corrupt(
        kind,
        prompts,
        params,
        [c.output for c in honest],
        vocab_size=rescorer.shard.config.vocab_size,
        rng=random.Random(0),
        generate=lambda p, sp: [list(c.output) for c in generate(corrupt_model, p, sp)],
    )
    corrupted = [Claim(c.prompt, tuple(o), c.params) for c, o in zip(honest, outputs, strict=True)]
    verdicts = [
        verify(c.output, c.params, s)
        for c, s in zip(honest + corrupted, rescorer.score(honest + corrupted), strict=True)
    ]
    changed = [o != list(c.output) for o, c in zip(outputs, honest, strict=True)]
    assert sum(changed) >= 5
    assert [v.passed for v in verdicts] == [True] * 6 + [not c for c in changed], verdicts


@pytest.mark.parametrize("kind", ["substitute", "other_checkpoint"])
def test_sampled_lines_with_a_substituted_token_or_from_another_checkpoint_fail(
    kind: str, checkpoint: Path, other_checkpoint: Path, rescorer: Rescorer
) -> None:
    sampled_corruptions_fail(kind, checkpoint, other_checkpoint, rescorer)


@pytest.fixture(scope="module")
def real_rescorer(real_model: Path) -> Rescorer:
    return Rescorer.load(real_model)


@pytest.mark.parametrize("kind", ["wrong_temperature", "wrong_seed"])
def test_real_model_lines_drawn_by_another_rule_fail(
    kind: str, real_model: Path, real_rescorer: Rescorer
) -> None:
    """On real weights, whose distributions are peaked where the tiny random model's are flat, the noise of
    the right seed at the right temperature picks tokens far enough apart to tell a wrong draw."""
    sampled_corruptions_fail(kind, real_model, real_model, real_rescorer)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    prompt=st.lists(st.integers(0, 255), min_size=1, max_size=24),
    max_tokens=st.integers(1, 24),
)
def test_any_honest_greedy_output_passes(
    checkpoint: Path, rescorer: Rescorer, stop_token: int, prompt: list[int], max_tokens: int
) -> None:
    params = SamplingParams(max_tokens=max_tokens, stop_token_ids=(stop_token,))
    [claim] = generate(checkpoint, [prompt], [params])
    [scores] = rescorer.score([claim])
    verdict = verify(claim.output, params, scores, DEFAULT_TOLERANCES)
    assert verdict.passed, verdict
