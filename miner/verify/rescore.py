"""Re-scoring: one teacher-forced forward pass over prompt + claimed output with our own model code.

A verifier does not regenerate: it feeds the prompt and the claimed output tokens (all but the last) through
the whole model in one prefill, reads the logits at every position that predicts an output token, and
reduces each to the few numbers the policy needs (miner/verify/policy.py). That costs one prefill instead of
a generation. Lines are packed into forward passes of at most `token_budget` fed tokens and `scored_budget`
scored positions (each scored position costs a row of vocabulary-wide logits, several copies of it while the
verdicts are computed: the memory of a pass is theirs), each sequence in its own contiguous run of pages of a
fresh paged cache, through the same BatchLayout and attention as the engine. Fewer, larger passes launch fewer
kernels, which is what re-scoring many short lines on a GPU waits on.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from client_sdk.protocol.sampling import SamplingParams
from miner.attention.layout import BatchLayout
from miner.engine import gumbel
from miner.engine.sampler import draw, draw_keys, row_index, scale, top_p_sets
from miner.kv.cache import PAGE_SIZE, PagedKVCache
from miner.model.config import ModelConfig
from miner.model.shard import StageShard

# How much an honest miner's top-p set may differ from the reference's, in probability mass (see
# miner/verify/policy.py, which chooses it).
DEFAULT_TOP_P_SLACK = 0.075


@dataclass(frozen=True)
class Claim:
    """A request as the verifier re-derives it, and the output token ids the miner claims for it."""

    prompt: tuple[int, ...]
    output: tuple[int, ...]
    params: SamplingParams


@dataclass(frozen=True)
class TokenScore:
    """The reference's verdict-relevant facts at one claimed output token."""

    token: int  # the claimed token
    chosen: int  # what the reference chooses there: its argmax, or its Gumbel-max draw for a sampled request
    # How far the claimed token scores below the best token an honest miner could have chosen, in logits: for
    # a greedy request the largest logit less the claimed token's; for a sampled one the same of the perturbed
    # scores logit + temperature * g over the tokens surely in the top-p set (negative when the claimed one
    # scores higher).
    gap: float
    # The rest are at the request's temperature (1 for greedy requests), as the engine's sampler sees them.
    logprob: float  # log-probability of the claimed token
    rank: int  # tokens with a strictly higher logit
    mass_before: float  # probability mass of those tokens: the claimed token is in the top-p set iff < top_p

    @property
    def reproduced(self) -> bool:
        return self.token == self.chosen


@dataclass(frozen=True)
class ScoringLayout(BatchLayout):
    """A BatchLayout whose "last tokens" are every position that predicts a claimed output token.

    StageShard.forward computes logits only at the layout's last-token indices; teacher forcing needs them at
    each sequence's last prompt token and at every output token but the last, which these indices select.
    """

    scored_indices: tuple[int, ...] = ()

    def last_token_indices(self, device: torch.device) -> torch.Tensor:
        return torch.tensor(self.scored_indices, dtype=torch.long, device=device)


class Rescorer:
    def __init__(
        self,
        shard: StageShard,
        page_size: int = PAGE_SIZE,
        token_budget: int = 16384,
        scored_budget: int = 4096,
    ) -> None:
        if not (shard.is_first and shard.is_last):
            raise ValueError("re-scoring needs the whole model in one shard")
        self.shard = shard
        self.page_size = page_size
        self.token_budget = token_budget
        self.scored_budget = scored_budget

    @classmethod
    def load(cls, model_dir: Path, device: str = "cpu", dtype: torch.dtype = torch.float32) -> Rescorer:
        """The reference: the whole checkpoint in float32 unless told otherwise."""
        config = ModelConfig.load(model_dir)
        return cls(StageShard.load(model_dir, 0, config.num_layers, dtype, device))

    def score(
        self, claims: Sequence[Claim], top_p_slack: float = DEFAULT_TOP_P_SLACK
    ) -> list[list[TokenScore]]:
        """One TokenScore per claimed output token, for each claim in order (empty for an empty output);
        sampled tokens' gaps are taken against top-p sets narrowed by `top_p_slack`."""
        vocab = self.shard.config.vocab_size
        for claim in claims:
            if not claim.prompt:
                raise ValueError("a claim needs a prompt: its first output token is predicted from it")
            if any(not 0 <= t < vocab for t in (*claim.prompt, *claim.output)):
                raise ValueError(f"a token id is outside the vocabulary of {vocab}")
        scores: list[list[TokenScore]] = [[] for _ in claims]
        scorable = [i for i, c in enumerate(claims) if c.output]
        for group in packed(scorable, claims, self.token_budget, self.scored_budget):
            grouped = [claims[i] for i in group]
            rows = token_scores(self._forward(grouped), grouped, top_p_slack)
            for index, claim_scores in zip(group, rows, strict=True):
                scores[index] = claim_scores
        return scores

    @torch.inference_mode()
    def _forward(self, claims: list[Claim]) -> torch.Tensor:
        """Reference float32 logits [output tokens of all claims, vocab], claim after claim, from one forward
        pass, on the shard's device (a GPU verifier scores where its logits are)."""
        shard, size = self.shard, self.page_size
        lengths = [_fed_length(c) for c in claims]
        tables, first_page = [], 0
        for length in lengths:
            pages = -(-length // size)
            tables.append(tuple(range(first_page, first_page + pages)))
            first_page += pages
        scored: list[int] = []
        start = 0
        for claim, length in zip(claims, lengths, strict=True):
            scored.extend(range(start + len(claim.prompt) - 1, start + length))
            start += length
        layout = ScoringLayout(
            context_lens=(0,) * len(claims),
            query_lens=tuple(lengths),
            block_tables=tuple(tables),
            page_size=size,
            scored_indices=tuple(scored),
        )
        cache = PagedKVCache(shard.kv_shape, first_page, size)
        tokens = [t for c in claims for t in (c.prompt + c.output)[: _fed_length(c)]]
        logits = shard.forward(torch.tensor(tokens, dtype=torch.long, device=shard.device), layout, cache)
        return logits.float()


def packed(
    indices: list[int], claims: Sequence[Claim], token_budget: int, scored_budget: int
) -> Iterator[list[int]]:
    """`indices` in order, cut into passes whose fed tokens fit `token_budget` and whose scored positions (one
    per output token) fit `scored_budget`; a claim over either budget goes alone."""
    group: list[int] = []
    fed = scored = 0
    for index in indices:
        size, outputs = _fed_length(claims[index]), len(claims[index].output)
        if group and (fed + size > token_budget or scored + outputs > scored_budget):
            yield group
            group, fed, scored = [], 0, 0
        group.append(index)
        fed, scored = fed + size, scored + outputs
    if group:
        yield group


def _fed_length(claim: Claim) -> int:
    """The last output token predicts nothing that is checked, so it is not fed."""
    return len(claim.prompt) + len(claim.output) - 1


def token_scores(logits: torch.Tensor, claims: Sequence[Claim], top_p_slack: float) -> list[list[TokenScore]]:
    """TokenScores of each claim's output from the reference logits [output tokens of all claims, vocab]
    that predict them, claim after claim; a claim's first output token is at absolute position len(prompt).
    A sampled token's gap is taken against the top-p set narrowed by `top_p_slack`, the tokens every honest
    miner's set holds. All rows are scored together (a few tensor operations for a whole packed pass, not a
    few per line: on a GPU the per-line operations would cost more than the forward pass)."""
    params = [c.params for c in claims for _ in c.output]
    positions = [len(c.prompt) + i for c in claims for i in range(len(c.output))]
    output = [t for c in claims for t in c.output]
    claimed = torch.tensor(output, dtype=torch.long, device=logits.device)[:, None]
    claimed_logit = logits.gather(1, claimed)[:, 0]
    # the engine's sampler divides by the temperature; greedy requests are described at temperature 1
    temperatures = [p.temperature or 1.0 for p in params]
    logprobs = torch.log_softmax(logits / torch.tensor(temperatures, device=logits.device)[:, None], dim=1)
    above = logits > claimed_logit[:, None]
    mass_before = (logprobs.exp() * above).sum(dim=1)
    chosen = torch.empty_like(claimed[:, 0])
    gap = torch.empty_like(claimed_logit)
    greedy = [i for i, p in enumerate(params) if p.temperature == 0]
    sampled = [i for i, p in enumerate(params) if p.temperature != 0]
    if greedy:
        rows = row_index(greedy, len(params), logits.device)
        best, chosen[rows] = logits[rows].max(dim=1)
        gap[rows] = best - claimed_logit[rows]
    if sampled:
        rows, chosen_params = row_index(sampled, len(params), logits.device), [params[i] for i in sampled]
        scaled = scale(logits[rows], chosen_params)
        keys = draw_keys(chosen_params, [positions[i] for i in sampled])
        chosen[rows], _ = draw(scaled, chosen_params, keys)
        # the top token always (its mass before is 0), so the set is never empty
        narrow = top_p_sets(scaled, [max(p.top_p - top_p_slack, 1e-6) for p in chosen_params])
        _, best = gumbel.gumbel_max(scaled, keys, narrow)
        claimed_score = scaled.gather(1, claimed[rows])[:, 0] + gumbel.noise_of(keys, claimed[rows][:, 0])
        sampled_temperatures = torch.tensor([temperatures[i] for i in sampled], device=logits.device)
        gap[rows] = sampled_temperatures * (best - claimed_score)
    columns = zip(
        output,
        chosen.tolist(),
        gap.tolist(),
        logprobs.gather(1, claimed)[:, 0].tolist(),
        above.sum(dim=1).tolist(),
        mass_before.tolist(),
        strict=True,
    )
    every = [TokenScore(*column) for column in columns]
    ends = list(itertools.accumulate(len(c.output) for c in claims))
    return [every[end - len(c.output) : end] for c, end in zip(claims, ends, strict=True)]
