"""The verification policy: does a claimed output pass against the reference's re-scoring?

Rules, in the order they are checked (the first failure is the verdict; `judge` also fails a claimed token
outside the vocabulary before re-scoring):

1. Structure. The engine stops at max_tokens or right after a stop token, never elsewhere, so an output
   longer than max_tokens ("too_long"), one that goes on after a stop token ("past_stop"), and one that ends
   before max_tokens without a stop token ("truncated") cannot be honest, whatever the model.
2. Greedy requests (temperature 0). Each claimed token must be the reference argmax or have a logit within
   `greedy_logit_gap` (epsilon) of the reference's largest logit ("greedy_gap"). An honest miner on another
   GPU, dtype or stage split computes slightly different logits, so where the top two logits nearly tie it may
   pick the runner-up; epsilon absorbs that. A substituted token or another model's token is almost never
   that close to the top.
3. Sampled requests. The sampler draws from the smallest prefix of the sorted distribution (at the request's
   temperature) whose mass reaches top_p. Each claimed token must lie inside that set widened by
   `top_p_slack`: the mass of the tokens ranked above it must be below top_p + top_p_slack ("outside_top_p").
   With top_p = 1 every token is inside, so a single rare token cannot be told from an honest draw.
4. Sampled requests, the whole sequence. An honest draw's log-probability has, at each position, a known mean
   and variance under the reference's top-p distribution; their sums give the z-score of the sequence's mean
   log-probability. It must stay within `logprob_z` of zero ("logprob_too_low" / "logprob_too_high"):
   a bound relative to the reference's own expectation works for any model and prompt entropy, where an
   absolute bound on the mean log-probability would not. Too low catches substituted tokens, outputs of
   another model and sampling at a higher temperature; too high catches sampling at a lower temperature
   (greedy answers to a sampled request included).

Before re-scoring, the verifier holds the leaf's token counts against the line (`count_fault`): payment is
computed from them, so a leaf that counts more input tokens than the request's prompt has, or more output
tokens than the result carries, overcharges, and an error line served none.

Whether the output ids are the ones the result's text decodes from is not checked here: the result leaf binds
the text, and the verifier takes the ids from the evidence.

The tolerances are chosen from measurements, not guessed: bench/verification_error_rates.py generates honest
outputs in float32 and bfloat16 over several stage splits and corrupted ones of each kind, re-scores them
against the float32 reference and prints the margins (largest honest gap against smallest corrupted gap and
so on) with the false-flag and detection rates at these values.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from client_sdk.results import ResultLeaf
from miner.engine.sequence import SamplingParams
from miner.verify.rescore import Claim, Rescorer, TokenScore


@dataclass(frozen=True)
class Tolerances:
    greedy_logit_gap: float  # epsilon: how far below the top logit a greedy token may be
    top_p_slack: float  # how much the top-p set is widened
    logprob_z: float  # how many standard errors the mean log-probability may stray from its expectation


STRUCTURAL_REASONS = ("too_long", "past_stop", "truncated")

# Chosen from bench/results/verification_error_rates.txt (tiny Qwen3, 512 honest lines per mode in float32 and
# bfloat16 over 1-3 stages, 512 corrupted lines per kind and mode; two runs, before and after sampling was
# seeded per position). Honest greedy tokens sat at most 0.10 below the top logit and every corrupted greedy
# line had a token at least 0.77 below it: epsilon 0.5 leaves 5x room for larger numeric differences (other
# GPUs, bigger models) and is still 1.5x under the smallest corrupted gap. Honest sampled tokens sat at most
# 0.007 beyond top_p: a slack of 0.05 is 7x that. Honest |z| reached 3.2; the bound 5 is a false-flag rate
# choice (|z| > 5 has probability 6e-7 for a normal statistic), since a false flag slashes an honest miner
# while a miss only fails to catch one cheat.
DEFAULT_TOLERANCES = Tolerances(greedy_logit_gap=0.5, top_p_slack=0.05, logprob_z=5.0)


@dataclass(frozen=True)
class Verdict:
    passed: bool
    reason: str  # "ok" or the failed rule
    position: int | None = None  # the first failing output position (None: the whole sequence or structure)
    gap: float = 0.0  # at the failing position, or the largest over the output when it passed
    rank: int = 0  # likewise
    mass_before: float = 0.0  # likewise
    mean_logprob: float = 0.0  # of the claimed tokens at the request's temperature
    logprob_z: float = 0.0  # its z-score (sampled requests)
    scored: bool = False  # decided by re-scoring: the numbers above are the reference's


def count_fault(leaf: ResultLeaf, claim: Claim | None) -> str | None:
    """Why the leaf's token counts are not the line's, or None when they are: the input count must be the
    prompt's length as the miner prepared it and the output count the number of output ids the result carries.
    `claim` is None for an error line, whose honest leaf counts no tokens (the coordinator builds it so)."""
    if claim is None:
        if leaf.input_tokens or leaf.output_tokens:
            return (
                f"the leaf counts {leaf.input_tokens} input and {leaf.output_tokens} output tokens; "
                "an error line served none"
            )
        return None
    if leaf.input_tokens != len(claim.prompt):
        return f"the leaf counts {leaf.input_tokens} input tokens; the request has {len(claim.prompt)}"
    if leaf.output_tokens != len(claim.output):
        return f"the leaf counts {leaf.output_tokens} output tokens; the result carries {len(claim.output)}"
    return None


def verify(
    output: Sequence[int],
    params: SamplingParams,
    scores: Sequence[TokenScore],
    tolerances: Tolerances = DEFAULT_TOLERANCES,
) -> Verdict:
    """The verdict on `output`, claimed for a request with `params`, given its re-scoring `scores`."""
    if len(scores) != len(output):
        raise ValueError("one score per output token is needed")
    structural = _structure(output, params)
    if structural:
        return Verdict(False, structural)
    mean_logprob = sum(s.logprob for s in scores) / len(scores)
    z = 0.0 if params.temperature == 0 else logprob_z(scores)
    for position, score in enumerate(scores):
        failed = _token_rule(score, params, tolerances)
        if failed:
            return Verdict(
                False,
                failed,
                position,
                score.gap,
                score.rank,
                score.mass_before,
                mean_logprob,
                z,
                scored=True,
            )
    bound = tolerances.logprob_z
    reason = "logprob_too_low" if z < -bound else "logprob_too_high" if z > bound else "ok"
    gap = max(s.gap for s in scores)
    rank = max(s.rank for s in scores)
    mass_before = max(s.mass_before for s in scores)
    return Verdict(reason == "ok", reason, None, gap, rank, mass_before, mean_logprob, z, scored=True)


def judge(
    rescorer: Rescorer, claims: Sequence[Claim], tolerances: Tolerances = DEFAULT_TOLERANCES
) -> list[Verdict]:
    """Verdicts on `claims`, re-scored together; a claimed token outside the vocabulary fails at once
    ("invalid_token": no honest engine emits one)."""
    vocab = rescorer.shard.config.vocab_size
    valid = [i for i, claim in enumerate(claims) if all(0 <= t < vocab for t in claim.output)]
    verdicts = [Verdict(False, "invalid_token") for _ in claims]
    for index, scores in zip(valid, rescorer.score([claims[i] for i in valid]), strict=True):
        verdicts[index] = verify(claims[index].output, claims[index].params, scores, tolerances)
    return verdicts


def logprob_z(scores: Sequence[TokenScore]) -> float:
    """How many standard errors the claimed tokens' total log-probability lies from an honest draw's mean."""
    deviation = sum(s.logprob - s.expected_logprob for s in scores)
    variance = sum(s.logprob_variance for s in scores)
    # a distribution with a single token left has no spread; the top-p rule has judged those tokens
    return deviation / math.sqrt(variance) if variance > 1e-9 else 0.0


def _structure(output: Sequence[int], params: SamplingParams) -> str | None:
    stops = params.stop_token_ids
    if len(output) > params.max_tokens:
        return "too_long"
    if any(token in stops for token in output[:-1]):
        return "past_stop"
    if len(output) < params.max_tokens and not (output and output[-1] in stops):
        return "truncated"
    return None


def _token_rule(score: TokenScore, params: SamplingParams, tolerances: Tolerances) -> str | None:
    if params.temperature == 0:
        ok = score.token == score.argmax or score.gap <= tolerances.greedy_logit_gap
        return None if ok else "greedy_gap"
    return None if score.mass_before < params.top_p + tolerances.top_p_slack else "outside_top_p"
