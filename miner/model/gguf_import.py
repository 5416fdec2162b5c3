"""Turns a GGUF file into a standard Hugging Face checkpoint (safetensors, config.json, tokenizer) that the
engine, the verifiers and transformers all load the same way.

transformers reads GGUF itself (dequantizing every tensor to float32; it needs the `gguf` and `accelerate`
packages) but refuses to `save_pretrained` a model it loaded that way, so the checkpoint is written here
from the state dict, the config and the tokenizer.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from client_sdk.errors import UserError

WEIGHTS_FILE = "model.safetensors"
# transformers' class per GGUF architecture, written into config.json (it comes out of the GGUF loader empty)
ARCHITECTURES = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM"}


def convert(gguf_file: Path, out_dir: Path) -> Path:
    """Writes the checkpoint of `gguf_file` into `out_dir` (float32 weights) and returns `out_dir`."""
    try:
        import torch
        from safetensors.torch import save_file
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as exc:  # pragma: no cover - the step's dependencies are declared in the `model` extra
        raise UserError(f"converting a GGUF file needs the `model` extra installed ({exc})") from None
    source, name = gguf_file.parent, gguf_file.name
    try:
        model = AutoModelForCausalLM.from_pretrained(source, gguf_file=name, dtype=torch.float32)
        tokenizer = AutoTokenizer.from_pretrained(source, gguf_file=name)
    except (OSError, ValueError, ImportError) as exc:
        raise UserError(f"cannot read {gguf_file} ({str(exc).splitlines()[0]})") from None
    out_dir.mkdir(parents=True, exist_ok=True)
    config = model.config
    if config.model_type not in ARCHITECTURES:
        raise UserError(f"{gguf_file}: architecture {config.model_type!r} is not one the engine serves")
    config.architectures = [ARCHITECTURES[config.model_type]]
    config.save_pretrained(out_dir)
    _drop_gguf_traces(out_dir / "config.json")
    save_file(_weights(model.state_dict(), tied=bool(config.tie_word_embeddings)), out_dir / WEIGHTS_FILE)
    tokenizer.save_pretrained(out_dir)
    return out_dir


def _drop_gguf_traces(config_file: Path) -> None:
    """The weights are plain float32 now: a `quantization_config` naming the GGUF file would make loaders
    look for it, and the GGUF's internal model name is not this checkpoint's."""
    config = json.loads(config_file.read_text())
    for key in ("quantization_config", "_model_name_or_path", "_name_or_path"):
        config.pop(key, None)
    config_file.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")


def _weights(state: dict[str, Any], tied: bool) -> dict[str, Any]:
    """The tensors to store: contiguous, each its own copy (safetensors refuses shared storage), without the
    LM head when it is the embedding (tied)."""
    return {
        name: tensor.detach().contiguous().clone()
        for name, tensor in state.items()
        if not (tied and name == "lm_head.weight")
    }
