"""Tiny random-weight checkpoints of each supported family, built with transformers (no download)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from transformers import AutoConfig, AutoModelForCausalLM

COMMON: dict[str, Any] = {
    "vocab_size": 128,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 512,
    # With the default 0.02 a tiny random model repeats one token forever; 0.15 gives varied continuations.
    "initializer_range": 0.15,
    "rms_norm_eps": 1e-6,
}

FAMILIES: dict[str, dict[str, Any]] = {
    "llama": {"rope_theta": 10_000.0},
    "llama3-rope": {
        "rope_scaling": {
            "rope_type": "llama3",
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 64,
        },
        "rope_theta": 500_000.0,
    },
    "mistral": {"sliding_window": None},
    "qwen2": {},
    "qwen3": {"head_dim": 32},
    "qwen3-tied": {"head_dim": 32, "tie_word_embeddings": True},
}


def model_type(family: str) -> str:
    return family.split("-")[0].replace("llama3", "llama")


def build_checkpoint(family: str, directory: Path, seed: int = 0) -> Path:
    """Saves a random-weight model of `family` (safetensors + config.json) into `directory`."""
    torch.manual_seed(seed)
    config = AutoConfig.for_model(model_type(family), **COMMON, **FAMILIES[family])
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.save_pretrained(directory, safe_serialization=True)
    return directory
