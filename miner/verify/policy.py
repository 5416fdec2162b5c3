"""The verification policy: does a claimed output pass against the reference's re-scoring?

Rules, in the order they are checked (the first failure is the verdict; `judge` also fails a claimed token
outside the vocabulary before re-scoring):

1. Structure. The engine stops at max_tokens or right after a stop token, never elsewhere, so an output
   longer than max_tokens ("too_long"), one that goes on after a stop token ("past_stop"), and one that ends
   before max_tokens without a stop token ("truncated") cannot be honest, whatever the model.
2. Greedy requests (temperature 0). Each claimed token must be the reference argmax or have a logit within
   `logit_gap` (epsilon) of the reference's largest logit ("greedy_gap"). An honest miner on another
   GPU, dtype or stage split computes slightly different logits, so where the top two logits nearly tie it may
   pick the runner-up; epsilon absorbs that. A substituted token or another model's token is almost never
   that close to the top.
3. Sampled requests: the same rule on perturbed scores. The engine draws by Gumbel-max with noise g fixed by
   the request's seed, the position and the token (miner/engine/sampler.py, docs/sampling.md): the token with
   the largest logit / temperature + g in the top-p set. The reference computes the same scores, so each
   claimed token must lie in the top-p set widened by `top_p_slack` (the mass of the tokens ranked above it
   below top_p + top_p_slack: "outside_top_p") and its perturbed score, in logits (logit + temperature * g),
   must be within `logit_gap` of the best over the top-p set narrowed by `top_p_slack` ("sampled_gap"): every
   honest miner's set lies between the two, so an honest draw that differs from the reference's only where
   perturbed scores nearly tie passes, and a token the noise did not pick fails, whatever its probability.

Before re-scoring, the verifier holds the leaf's token counts against the line (`count_fault`): payment is
computed from them, so a leaf that counts more input tokens than the request's prompt has, or more output
tokens than the result carries, overcharges, and an error line served none.

Whether the output ids are the ones the result's text decodes from is not checked here: the result leaf binds
the text, and the verifier takes the ids from the evidence.

The tolerances are chosen from measurements, not guessed: bench/verification_error_rates.py generates honest
outputs in float32 and bfloat16 over several stage splits and corrupted ones of each kind, re-scores them
against the float32 reference and prints the margins (largest honest gap against smallest corrupted gap and
so on) with the false-flag and detection rates at these values.

A cheaper model (quantized weights) differs from the reference only near ties, so many of its lines pass
one by one; `LineStats` keep what a verifier needs to score a miner over many lines.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from client_sdk.protocol.sampling import SamplingParams
from client_sdk.results import ResultLeaf
from miner.verify.rescore import DEFAULT_TOP_P_SLACK, Claim, Rescorer, TokenScore


@dataclass(frozen=True)
class Tolerances:
    logit_gap: float  # epsilon: how far below the reference's best (perturbed) logit a claimed token may be
    top_p_slack: float  # how much the top-p set is widened (and narrowed)


STRUCTURAL_REASONS = ("too_long", "past_stop", "truncated")

# Chosen from bench/results/verification_error_rates.txt (SmolLM2; honest lines in float32 and bfloat16 over
# 1-3 stages: 96 greedy, 2,000 sampled, about 40,000 sampled tokens). Honest greedy tokens sat at most 0.10
# below the top logit; honest sampled tokens at most 0.53 below the best perturbed score (one bfloat16 token:
# the next was 0.41), which a bound of 0.5 flagged. Epsilon 1.0 is 1.9x the honest maximum and still under
# every corrupted line's worst gap but a few drawn from the right distribution by the wrong rule (wrong
# temperature or seed) at near-ties: substituted tokens and another checkpoint's sit at least 6.8 away. Honest
# sampled tokens sat at most 0.036 beyond top_p: the slack is 2.1x that, and still leaves the rule meaning at
# top_p 0.9 (a slack of 0.1 would pass every token there; another top_p changes no cost, so little rides on
# it).
DEFAULT_TOLERANCES = Tolerances(logit_gap=1.0, top_p_slack=DEFAULT_TOP_P_SLACK)


@dataclass(frozen=True)
class LineStats:
    """What one re-scored line adds to its miner's score: output tokens, how many of them are not the token
    the reference chooses, and the sum of their gaps (each clipped to [0, logit_gap])."""

    tokens: int
    mismatches: int
    gap_sum: float

    @classmethod
    def of(cls, scores: Sequence[TokenScore], cap: float) -> LineStats:
        gaps = [min(max(s.gap, 0.0), cap) for s in scores if not s.reproduced]
        return cls(len(scores), len(gaps), sum(gaps))


@dataclass(frozen=True)
class Verdict:
    passed: bool
    reason: str  # "ok" or the failed rule
    position: int | None = None  # the first failing output position (None: the whole sequence or structure)
    gap: float = 0.0  # at the failing position, or the largest over the output when it passed
    rank: int = 0  # likewise
    mass_before: float = 0.0  # likewise
    mean_logprob: float = 0.0  # of the claimed tokens at the request's temperature
    stats: LineStats | None = None  # the reproduction counts, when decided by re-scoring


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
    stats = LineStats.of(scores, tolerances.logit_gap)
    for position, score in enumerate(scores):
        failed = _token_rule(score, params, tolerances)
        if failed:
            return Verdict(
                False, failed, position, score.gap, score.rank, score.mass_before, mean_logprob, stats
            )
    gap = max(s.gap for s in scores)
    rank = max(s.rank for s in scores)
    mass_before = max(s.mass_before for s in scores)
    return Verdict(True, "ok", None, gap, rank, mass_before, mean_logprob, stats)


def judge(
    rescorer: Rescorer, claims: Sequence[Claim], tolerances: Tolerances = DEFAULT_TOLERANCES
) -> list[Verdict]:
    """Verdicts on `claims`, re-scored together; a claimed token outside the vocabulary fails at once
    ("invalid_token": no honest engine emits one)."""
    vocab = rescorer.shard.config.vocab_size
    valid = [i for i, claim in enumerate(claims) if all(0 <= t < vocab for t in claim.output)]
    verdicts = [Verdict(False, "invalid_token") for _ in claims]
    scored = rescorer.score([claims[i] for i in valid], tolerances.top_p_slack)
    for index, scores in zip(valid, scored, strict=True):
        verdicts[index] = verify(claims[index].output, claims[index].params, scores, tolerances)
    return verdicts


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
    close = score.reproduced or score.gap <= tolerances.logit_gap
    if params.temperature == 0:
        return None if close else "greedy_gap"
    if score.mass_before >= params.top_p + tolerances.top_p_slack:
        return "outside_top_p"
    return None if close else "sampled_gap"
