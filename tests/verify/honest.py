"""Honest outputs: what our engine generates on a checkpoint, as claims a verifier re-scores."""

from __future__ import annotations

from pathlib import Path

from client_sdk.protocol.sampling import SamplingParams
from miner.engine.engine import Engine
from miner.model.config import ModelConfig
from miner.model.shard import StageShard
from miner.verify.rescore import Claim


def generate(checkpoint: Path, prompts: list[list[int]], params: list[SamplingParams]) -> list[Claim]:
    layers = ModelConfig.load(checkpoint).num_layers
    engine = Engine([StageShard.load(checkpoint, 0, layers)], page_size=4, local_pages=128)
    outputs = engine.generate(prompts, params)
    return [Claim(tuple(p), tuple(o), sp) for p, o, sp in zip(prompts, outputs, params, strict=True)]
