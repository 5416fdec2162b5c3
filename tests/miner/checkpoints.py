"""Test helpers: tiny random-weight checkpoints (built by miner.tiny_checkpoint) and Hugging Face's greedy
output on them, the reference every exactness test compares with."""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import AutoModelForCausalLM

from miner.tiny_checkpoint import COMMON, FAMILIES, build_checkpoint, model_type

__all__ = ["COMMON", "FAMILIES", "build_checkpoint", "hf_greedy", "model_type"]


def hf_greedy(checkpoint: Path, prompts: list[list[int]], new_tokens: list[int]) -> list[list[int]]:
    """transformers `generate` without sampling, one prompt at a time, no end-of-sequence stop."""
    model = AutoModelForCausalLM.from_pretrained(checkpoint, dtype=torch.float32)
    outputs = []
    for prompt, count in zip(prompts, new_tokens, strict=True):
        out = model.generate(
            torch.tensor([prompt]), max_new_tokens=count, do_sample=False, eos_token_id=None, pad_token_id=0
        )
        outputs.append(out[0, len(prompt) :].tolist())
    return outputs
