"""The verification policy: each rule on hand-made scores, then honest outputs of our engine passing and each
corruption kind failing on real re-scorings."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from miner.engine.sequence import SamplingParams
from miner.verify.corrupt import corrupt
from miner.verify.policy import DEFAULT_TOLERANCES, Tolerances, judge, verify
from miner.verify.rescore import Claim, Rescorer, TokenScore
from tests.verify.honest import generate

STOP = 3
TOLERANCES = Tolerances(greedy_logit_gap=0.5, top_p_slack=0.05, logprob_z=4.0)


def score(
    token: int = 1, argmax: int = 1, gap: float = 0.0, mass_before: float = 0.0, **kw: float
) -> TokenScore:
    values = {"logprob": -1.0, "expected_logprob": -1.0, "logprob_variance": 1.0, **kw}
    return TokenScore(token, argmax, 5.0 - gap, 5.0, rank=int(gap > 0), mass_before=mass_before, **values)


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


def test_sampled_mean_logprob_must_stay_near_its_expectation() -> None:
    # three tokens of variance 1: the z-score is the summed deviation over sqrt(3)
    typical = [score(logprob=-1.0 - d) for d in (1.0, -0.5, 2.0)]
    assert verify([1, 1, 1], SAMPLED, typical, TOLERANCES).passed
    unlikely = [score(logprob=-5.0)] * 3  # z = -12 / sqrt(3) = -6.9
    assert verify([1, 1, 1], SAMPLED, unlikely, TOLERANCES).reason == "logprob_too_low"
    too_likely = [score(logprob=3.0)] * 3
    assert verify([1, 1, 1], SAMPLED, too_likely, TOLERANCES).reason == "logprob_too_high"


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


def test_sampled_outputs_at_twice_the_temperature_fail(
    checkpoint: Path, rescorer: Rescorer, stop_token: int
) -> None:
    """Long enough outputs (no stop token) that the mean log-probability tells the temperatures apart."""
    prompts = [[11 + i, 40, 7 * i] for i in range(4)]
    params = [SamplingParams(max_tokens=64, temperature=0.5, seed=i) for i in range(4)]
    honest = generate(checkpoint, prompts, params)
    outputs = corrupt(
        "wrong_temperature",
        prompts,
        params,
        [c.output for c in honest],
        vocab_size=rescorer.shard.config.vocab_size,
        rng=random.Random(0),
        generate=lambda p, sp: [list(c.output) for c in generate(checkpoint, p, sp)],
    )
    corrupted = [Claim(c.prompt, tuple(o), c.params) for c, o in zip(honest, outputs, strict=True)]
    verdicts = [
        verify(c.output, c.params, s)
        for c, s in zip(honest + corrupted, rescorer.score(honest + corrupted), strict=True)
    ]
    assert [v.passed for v in verdicts] == [True] * 4 + [False] * 4, verdicts


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
