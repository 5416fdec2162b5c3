"""Model shapes from a Hugging Face `config.json`: bytes per layer, KV bytes per token, embedding and head.

Capacities are counted in *layer units* of one decoder layer's bytes. A pipeline needs `units_needed` of them:
the L decoder layers plus the embedding (on its first stage) and the LM head (on its last), each rounded up to
whole units, so a contiguous split of the unit sequence always puts them on the right stages.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from coordinator.scheduling.errors import SchedulingError
from coordinator.scheduling.fields import count

DTYPE_BYTES = {"float32": 4.0, "bfloat16": 2.0, "float16": 2.0, "fp8": 1.0, "float8": 1.0, "int8": 1.0}
DEFAULT_KV_RESERVE = 0.3


@dataclass(frozen=True)
class ModelSpec:
    """A dense or mixture-of-experts decoder in one dtype."""

    name: str
    num_layers: int
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    dtype_bytes: float
    experts: int = 0
    active_experts: int = 0

    @cached_property
    def layer_params(self) -> int:
        attention = self.hidden * self.head_dim * (2 * self.heads + 2 * self.kv_heads)
        mlp = 3 * self.hidden * self.intermediate
        if self.experts:
            mlp = self.experts * mlp + self.hidden * self.experts
        return attention + mlp + 2 * self.hidden

    @cached_property
    def active_layer_params(self) -> int:
        """Parameters one token touches in a layer (all of them unless experts are routed)."""
        if not self.experts:
            return self.layer_params
        attention = self.hidden * self.head_dim * (2 * self.heads + 2 * self.kv_heads)
        return attention + self.active_experts * 3 * self.hidden * self.intermediate + 2 * self.hidden

    @cached_property
    def layer_bytes(self) -> float:
        return self.layer_params * self.dtype_bytes

    @cached_property
    def kv_bytes_per_token_layer(self) -> float:
        """KV cache bytes one token adds in one layer (keys and values)."""
        return 2 * self.kv_heads * self.head_dim * self.dtype_bytes

    @cached_property
    def kv_bytes_per_token(self) -> float:
        return self.kv_bytes_per_token_layer * self.num_layers

    @cached_property
    def embedding_bytes(self) -> float:
        return self.vocab * self.hidden * self.dtype_bytes

    @cached_property
    def head_bytes(self) -> float:
        """The LM head (a copy of the embedding when tied: the last stage holds it either way)."""
        return self.vocab * self.hidden * self.dtype_bytes

    @cached_property
    def embedding_units(self) -> int:
        return math.ceil(self.embedding_bytes / self.layer_bytes)

    @cached_property
    def head_units(self) -> int:
        return math.ceil(self.head_bytes / self.layer_bytes)

    @cached_property
    def units_needed(self) -> int:
        """Layer units one full pipeline holds: embedding + decoder layers + head."""
        return self.embedding_units + self.num_layers + self.head_units

    @cached_property
    def activation_bytes_per_token(self) -> float:
        """What a stage sends to the next one per token: one hidden vector."""
        return self.hidden * self.dtype_bytes

    def capacity_units(self, memory_bytes: float, kv_reserve: float = DEFAULT_KV_RESERVE) -> int:
        """Layer units that fit once `kv_reserve` of the memory is kept for KV cache and runtime."""
        return int(memory_bytes * (1.0 - kv_reserve) // self.layer_bytes)

    def layers_of_units(self, start: int, end: int) -> tuple[int, int]:
        """Decoder layers [start, end) inside the unit range [start, end) of a pipeline."""
        first = self.embedding_units
        return max(0, start - first), min(self.num_layers, end - first)

    @classmethod
    def from_hf_config(cls, config: Any, dtype: str | None = None, name: str = "model") -> ModelSpec:
        """Reads the fields every Llama/Mistral/Qwen2/Qwen3 config has; `dtype` overrides `torch_dtype`."""
        if not isinstance(config, dict):
            raise SchedulingError("model: expected a JSON object (a Hugging Face config.json)")
        chosen = dtype or config.get("torch_dtype") or config.get("dtype") or "bfloat16"
        if chosen not in DTYPE_BYTES:
            raise SchedulingError(f"model.torch_dtype: unsupported dtype {chosen!r}")

        def need(key: str) -> int:
            if key not in config:
                raise SchedulingError(f"model.{key}: missing")
            return count(config[key], f"model.{key}")

        hidden = need("hidden_size")
        heads = need("num_attention_heads")
        kv_heads = count(config.get("num_key_value_heads", heads), "model.num_key_value_heads")
        head_dim = config.get("head_dim") or hidden // heads
        experts = config.get("num_experts") or config.get("num_local_experts") or 0
        intermediate_key = "moe_intermediate_size" if experts and "moe_intermediate_size" in config else None
        return cls(
            name=name,
            num_layers=need("num_hidden_layers"),
            hidden=hidden,
            intermediate=need(intermediate_key or "intermediate_size"),
            heads=heads,
            kv_heads=kv_heads,
            head_dim=count(head_dim, "model.head_dim"),
            vocab=need("vocab_size"),
            dtype_bytes=DTYPE_BYTES[chosen],
            experts=count(experts, "model.num_experts", 0),
            active_experts=count(config.get("num_experts_per_tok", 0), "model.num_experts_per_tok", 0),
        )
