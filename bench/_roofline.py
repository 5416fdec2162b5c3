"""Rooflines measured on the machine at hand, and what a model's work costs against them."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from bench._timing import best_time
from miner.model.config import ModelConfig
from miner.model.linear import Linear


@dataclass(frozen=True)
class Roofs:
    flops_per_s: float
    bytes_per_s: float


def measure_roofs() -> Roofs:
    size = 2048
    a, b = torch.randn(size, size), torch.randn(size, size)
    packed = Linear(b)
    product = min(best_time(lambda: torch.mm(a, b), 5)[0], best_time(lambda: packed(a), 5)[0])
    source = torch.ones(2**26)  # 256 MiB of float32
    target = torch.empty_like(source)
    copy = best_time(lambda: target.copy_(source), 5)[0]
    return Roofs(2 * size**3 / product, 2 * source.nbytes / copy)  # a copy reads and writes every byte


@dataclass(frozen=True)
class ModelCost:
    """What one position, sampled token or attention pair costs on this model (float32)."""

    layer_weights: int  # weights of the decoder layers' matrix products
    head_weights: int
    attention_flops_per_pair: int  # QK and PV products, all layers
    kv_bytes_per_token: int  # its keys and values, all layers

    @classmethod
    def of(cls, config: ModelConfig) -> ModelCost:
        attention = config.num_heads * config.head_dim
        kv = config.num_kv_heads * config.head_dim
        per_layer = config.hidden_size * (attention + 2 * kv) + attention * config.hidden_size
        per_layer += 3 * config.hidden_size * config.intermediate_size
        return cls(
            layer_weights=config.num_layers * per_layer,
            head_weights=config.vocab_size * config.hidden_size,
            attention_flops_per_pair=4 * attention * config.num_layers,
            kv_bytes_per_token=2 * kv * config.num_layers * 4,
        )

    def flops(self, prompts: list[list[int]], outputs: list[list[int]]) -> int:
        total = 0
        for prompt, output in zip(prompts, outputs, strict=True):
            positions = len(prompt) + len(output) - 1
            pairs = positions * (positions + 1) // 2  # position i attends to i + 1 keys
            total += 2 * positions * self.layer_weights + 2 * len(output) * self.head_weights
            total += pairs * self.attention_flops_per_pair
        return total

    def bytes(self, steps: int, prompts: list[list[int]], outputs: list[list[int]]) -> int:
        weights = 4 * (self.layer_weights + self.head_weights)
        # a decoding token at position i reads the i + 1 keys and values before and at it
        keys_read = sum(
            sum(range(len(p) + 1, len(p) + len(o))) for p, o in zip(prompts, outputs, strict=True)
        )
        return steps * weights + keys_read * self.kv_bytes_per_token
