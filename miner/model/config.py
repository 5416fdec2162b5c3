"""The parts of a Hugging Face `config.json` our layer code needs, for the Llama, Mistral, Qwen2 and Qwen3
families, validated with errors that name the field."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from client_sdk.errors import UserError
from client_sdk.protocol.model_identity import checkpoint_config

SUPPORTED_FAMILIES = ("llama", "mistral", "qwen2", "qwen3")


@dataclass(frozen=True)
class RopeConfig:
    theta: float
    rope_type: str = "default"  # "default" or "llama3"
    factor: float = 1.0
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    original_max_position_embeddings: int = 8192


@dataclass(frozen=True)
class ModelConfig:
    family: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rms_norm_eps: float
    rope: RopeConfig
    max_position_embeddings: int
    tie_word_embeddings: bool
    qkv_bias: bool  # Qwen2 has biases on q, k and v
    qk_norm: bool  # Qwen3 normalizes q and k per head before RoPE

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> ModelConfig:
        family = str(raw.get("model_type", ""))
        if family not in SUPPORTED_FAMILIES:
            raise UserError(
                f"model_type {family!r} is not supported (supported: {', '.join(SUPPORTED_FAMILIES)})"
            )
        hidden = _positive(raw, "hidden_size")
        heads = _positive(raw, "num_attention_heads")
        kv_heads = int(raw.get("num_key_value_heads") or heads)
        if kv_heads <= 0 or heads % kv_heads:
            raise UserError(f"num_key_value_heads {kv_heads} must divide num_attention_heads {heads}")
        return cls(
            family=family,
            vocab_size=_positive(raw, "vocab_size"),
            hidden_size=hidden,
            intermediate_size=_positive(raw, "intermediate_size"),
            num_layers=_positive(raw, "num_hidden_layers"),
            num_heads=heads,
            num_kv_heads=kv_heads,
            head_dim=int(raw.get("head_dim") or hidden // heads),
            rms_norm_eps=float(raw.get("rms_norm_eps", 1e-6)),
            rope=_rope(raw),
            max_position_embeddings=_positive(raw, "max_position_embeddings"),
            tie_word_embeddings=bool(raw.get("tie_word_embeddings", False)),
            qkv_bias=bool(raw.get("attention_bias", family == "qwen2")),
            qk_norm=family == "qwen3",
        )

    @classmethod
    def load(cls, checkpoint_dir: Path) -> ModelConfig:
        path = checkpoint_config(checkpoint_dir)
        try:
            raw = json.loads(path.read_text())
        except ValueError as exc:
            raise UserError(f"{path} is not valid JSON: {exc}") from None
        return cls.from_dict(raw)


def _positive(raw: dict[str, Any], key: str) -> int:
    value = raw.get(key)
    if not isinstance(value, int) or value <= 0:
        raise UserError(f"config field {key} must be a positive integer, got {value!r}")
    return value


def _rope(raw: dict[str, Any]) -> RopeConfig:
    # transformers 4 writes rope_theta + rope_scaling; transformers 5 writes rope_parameters.
    params = dict(raw.get("rope_parameters") or raw.get("rope_scaling") or {})
    theta = float(params.get("rope_theta", raw.get("rope_theta", 10_000.0)))
    rope_type = str(params.get("rope_type", params.get("type", "default")))
    if rope_type not in ("default", "llama3"):
        raise UserError(f"rope type {rope_type!r} is not supported (supported: default, llama3)")
    if rope_type == "default":
        return RopeConfig(theta=theta)
    return RopeConfig(
        theta=theta,
        rope_type=rope_type,
        factor=float(params["factor"]),
        low_freq_factor=float(params["low_freq_factor"]),
        high_freq_factor=float(params["high_freq_factor"]),
        original_max_position_embeddings=int(params["original_max_position_embeddings"]),
    )
