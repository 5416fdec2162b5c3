"""Honest outputs: what our engine generates on a checkpoint, as claims a verifier re-scores."""

from __future__ import annotations

import functools
from pathlib import Path

from client_sdk.protocol.sampling import SamplingParams
from miner.engine.engine import Engine
from miner.model.config import ModelConfig
from miner.model.shard import StageShard
from miner.verify.rescore import Claim


@functools.cache
def whole_model(checkpoint: Path) -> StageShard:
    """The checkpoint's weights as one stage, loaded once per test process (a shard holds weights only: each
    engine brings its own KV pages)."""
    return StageShard.load(checkpoint, 0, ModelConfig.load(checkpoint).num_layers)


def generate(checkpoint: Path, prompts: list[list[int]], params: list[SamplingParams]) -> list[Claim]:
    engine = Engine([whole_model(checkpoint)], page_size=4, local_pages=128)
    outputs = engine.generate(prompts, params)
    return [Claim(tuple(p), tuple(o), sp) for p, o, sp in zip(prompts, outputs, params, strict=True)]
