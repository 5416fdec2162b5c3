"""A faulty miner's corruptions of claimed outputs, for the error-rate benchmark and the dispute tests.

Each kind turns an honest output into one a cheating miner might return:
- "substitute": one token, at a random position, replaced by a random other token;
- "truncate": cut before its natural end, so it ends on neither max_tokens nor a stop token;
- "other_checkpoint": what another model (same architecture, other weights) generates for the request;
- "wrong_temperature": what the model samples at another temperature than the request's (1 for a greedy
  request, twice the requested one otherwise);
- "wrong_top_p": what it samples at another top_p (1 where the request's is below, else 0.5);
- "wrong_seed": what it samples with another seed (the request's with its lowest bit flipped), as a miner
  that ignores the seed would.

A cheaper miner may also keep its KV cache at bfloat16 precision while the task's model runs in float32
(`bfloat16_kv_cache`): half the cache memory, outputs that differ from the reference only near ties.

`miner serve` corrupts a chosen fraction of its lines only when BATCHMARKET_TEST_CORRUPT is set (see
`from_environment`); nothing else reads it.
"""

from __future__ import annotations

import hashlib
import os
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from client_sdk.protocol.sampling import SamplingParams
from miner.attention.reference import ReferenceAttention
from miner.engine.engine import Engine
from miner.kv.cache import PAGE_SIZE
from miner.model.config import ModelConfig
from miner.model.shard import StageShard

KINDS = ("substitute", "truncate", "other_checkpoint", "wrong_temperature", "wrong_top_p", "wrong_seed")
ENV = "BATCHMARKET_TEST_CORRUPT"

Generate = Callable[[list[list[int]], list[SamplingParams]], list[list[int]]]  # e.g. Engine.generate


def substitute(output: Sequence[int], vocab_size: int, rng: random.Random) -> list[int]:
    position = rng.randrange(len(output))
    other = rng.randrange(vocab_size - 1)
    corrupted = list(output)
    corrupted[position] = other if other < output[position] else other + 1  # any token but the honest one
    return corrupted


def truncate(output: Sequence[int], params: SamplingParams, rng: random.Random) -> list[int]:
    """A proper prefix (possibly empty) that does not end on a stop token, so it cannot pass as finished."""
    cuts = [n for n in range(len(output)) if n == 0 or output[n - 1] not in params.stop_token_ids]
    return list(output[: rng.choice(cuts)])


def wrong_temperature(params: SamplingParams) -> SamplingParams:
    return replace(params, temperature=1.0 if params.temperature == 0 else 2 * params.temperature)


# the request a miner serves in place of the one it was given, per kind that generates with the same model
MISREAD: dict[str, Callable[[SamplingParams], SamplingParams]] = {
    "other_checkpoint": lambda p: p,
    "wrong_temperature": wrong_temperature,
    "wrong_top_p": lambda p: replace(p, top_p=1.0 if p.top_p < 1 else 0.5),
    "wrong_seed": lambda p: replace(p, seed=p.seed ^ 1),
}


def corrupt(
    kind: str,
    prompts: Sequence[Sequence[int]],
    params: Sequence[SamplingParams],
    outputs: Sequence[Sequence[int]],
    *,
    vocab_size: int,
    rng: random.Random,
    generate: Generate | None = None,
) -> list[list[int]]:
    """Corrupted versions of `outputs` (all of them: pass only the chosen lines). "other_checkpoint" needs
    `generate` of the other model, the other generating kinds `generate` of the same one."""
    if kind == "substitute":
        return [substitute(o, vocab_size, rng) for o in outputs]
    if kind == "truncate":
        return [truncate(o, p, rng) for o, p in zip(outputs, params, strict=True)]
    if kind not in KINDS:
        raise ValueError(f"unknown corruption {kind!r} (one of {', '.join(KINDS)})")
    if generate is None:
        raise ValueError(f"corruption {kind!r} needs a model to generate with")
    return generate([list(p) for p in prompts], [MISREAD[kind](p) for p in params])


@dataclass(frozen=True)
class CorruptionSwitch:
    """Which lines a faulty test miner corrupts, and how."""

    kind: str
    fraction: float
    other_checkpoint: Path | None = None

    def chooses(self, custom_id: str) -> bool:
        """A stable choice per line, so a test knows in advance which lines are corrupted."""
        draw = int.from_bytes(hashlib.sha256(custom_id.encode()).digest()[:8], "big") / 2**64
        return draw < self.fraction

    def apply(
        self,
        custom_ids: Sequence[str],
        prompts: Sequence[Sequence[int]],
        params: Sequence[SamplingParams],
        outputs: Sequence[Sequence[int]],
        *,
        vocab_size: int,
        same_model: Generate,
    ) -> list[list[int]]:
        """`outputs` with the chosen lines corrupted; `same_model` generates with the serving model."""
        result = [list(o) for o in outputs]
        chosen = [i for i, custom_id in enumerate(custom_ids) if self.chooses(custom_id)]
        if not chosen:
            return result
        generate = whole_model_generate(self.other_checkpoint) if self.other_checkpoint else same_model
        corrupted = corrupt(
            self.kind,
            [prompts[i] for i in chosen],
            [params[i] for i in chosen],
            [outputs[i] for i in chosen],
            vocab_size=vocab_size,
            rng=random.Random(0),
            generate=generate,
        )
        for index, output in zip(chosen, corrupted, strict=True):
            result[index] = output
        return result


def whole_model_generate(model_dir: Path, page_size: int = PAGE_SIZE) -> Generate:
    """Engine.generate of the whole checkpoint in one stage, with pages for every request at once."""

    def generate(prompts: list[list[int]], params: list[SamplingParams]) -> list[list[int]]:
        layers = ModelConfig.load(model_dir).num_layers
        longest = max(len(p) + sp.max_tokens for p, sp in zip(prompts, params, strict=True))
        pages = len(prompts) * -(-longest // page_size)
        engine = Engine([StageShard.load(model_dir, 0, layers)], page_size=page_size, local_pages=pages)
        return engine.generate(prompts, params)

    return generate


class _Bfloat16KeysAndValues(ReferenceAttention):
    """The reference attention over keys and values rounded to bfloat16 as they are written to the cache."""

    def __call__(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        key_cache: torch.Tensor,
        value_cache: torch.Tensor,
    ) -> torch.Tensor:
        return super().__call__(q, k.bfloat16().to(k.dtype), v.bfloat16().to(v.dtype), key_cache, value_cache)


def bfloat16_kv_cache(shard: StageShard) -> StageShard:
    """`shard`, now keeping its keys and values at bfloat16 precision (the reference attention backend)."""
    a = shard.attention
    shard.attention = _Bfloat16KeysAndValues(a.num_heads, a.num_kv_heads, a.head_dim, a.dtype, a.device)
    return shard


def from_environment() -> CorruptionSwitch | None:
    """The switch BATCHMARKET_TEST_CORRUPT="KIND:FRACTION[:OTHER_CHECKPOINT_DIR]" sets (e.g.
    "substitute:0.5"); None when it is unset."""
    value = os.environ.get(ENV)
    if not value:
        return None
    kind, _, rest = value.partition(":")
    fraction, _, directory = rest.partition(":")
    if kind not in KINDS:
        raise ValueError(f"{ENV}: unknown corruption {kind!r} (one of {', '.join(KINDS)})")
    if kind == "other_checkpoint" and not directory:
        raise ValueError(f"{ENV}: other_checkpoint needs a checkpoint directory (other_checkpoint:F:DIR)")
    return CorruptionSwitch(kind, float(fraction or 1.0), Path(directory) if directory else None)
