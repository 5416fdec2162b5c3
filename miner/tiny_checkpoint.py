"""Tiny random-weight checkpoints of each supported family, with a small tokenizer, built offline.

For tests and for trying `miner run-local` without downloading a model:

    python -m miner.tiny_checkpoint DIR --family qwen3

writes a Hugging Face checkpoint directory (config.json + model.safetensors, random weights from a fixed seed)
and, unless --no-tokenizer, a byte-level BPE tokenizer trained on a few built-in sentences with a ChatML chat
template. The text it generates is random, but every code path of a real checkpoint is exercised.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, cast

import typer

from client_sdk.cli.support import console, one_line_errors
from client_sdk.errors import UserError

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

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
CORPUS = (
    "A miner serves a slice of a language model as one stage of a pipeline.",
    "The coordinator plans pipelines over idle GPUs and routes batches of prompts to them.",
    "Every result line is signed by the miners that produced it and committed on chain.",
    "Write a short poem about the sea. Summarize the following text in one sentence.",
    "What is the capital of France? Paris is the capital and largest city of France.",
    "The quick brown fox jumps over the lazy dog, then naps in the warm afternoon sun.",
    "Numbers 0 1 2 3 4 5 6 7 8 9 and punctuation: commas, periods. Questions? Answers!",
)


def model_type(family: str) -> str:
    return family.split("-")[0].replace("llama3", "llama")


def build_checkpoint(family: str, directory: Path, seed: int = 0, **overrides: Any) -> Path:
    """Saves a random-weight model of `family` (safetensors + config.json) into `directory`."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.utils import logging

    logging.disable_progress_bar()  # type: ignore[no-untyped-call]  # transformers leaves it unannotated
    torch.manual_seed(seed)
    config = AutoConfig.for_model(model_type(family), **{**COMMON, **FAMILIES[family], **overrides})
    model = AutoModelForCausalLM.from_config(  # type: ignore[no-untyped-call]  # unannotated in transformers
        config, dtype=torch.float32
    )
    model.save_pretrained(directory, safe_serialization=True)
    return directory


def build_tokenizer(directory: Path, vocab_size: int = 384) -> tuple[int, int]:
    """Trains a byte-level BPE tokenizer on CORPUS (any text encodes: every byte has a token) and saves it
    with a chat template; returns its vocabulary size and end-of-sequence id."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(CORPUS, trainer)
    fast = PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]  # unannotated in transformers
        tokenizer_object=tokenizer, eos_token="<|im_end|>", pad_token="<|endoftext|>"
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(directory)
    return len(fast), cast(int, fast.convert_tokens_to_ids("<|im_end|>"))  # one token: one id


def build_tiny_model(directory: Path, family: str = "qwen3", seed: int = 0, **overrides: Any) -> Path:
    """A checkpoint plus tokenizer that `miner run-local` can serve."""
    directory.mkdir(parents=True, exist_ok=True)
    vocab, eos = build_tokenizer(directory)
    return build_checkpoint(family, directory, seed, vocab_size=vocab, eos_token_id=eos, **overrides)


def main(
    directory: Annotated[Path, typer.Argument(help="Where to write the checkpoint (created if missing).")],
    family: Annotated[str, typer.Option(help=f"Model family: {', '.join(FAMILIES)}.")] = "qwen3",
    layers: Annotated[int, typer.Option(min=1, max=64, help="Decoder layers (stages split them).")] = 4,
    seed: Annotated[int, typer.Option(min=0, help="Seed of the random weights.")] = 0,
) -> None:
    """Build a tiny random-weight checkpoint with a tokenizer and a chat template, offline."""
    if family not in FAMILIES:
        raise UserError(f"unknown family {family!r} (choose from {', '.join(FAMILIES)})")
    if directory.exists() and any(directory.iterdir()):
        raise UserError(f"{directory} is not empty")
    build_tiny_model(directory, family, seed, num_hidden_layers=layers)
    console.print(f"wrote a {layers}-layer {family} checkpoint with a tokenizer to {directory}")


if __name__ == "__main__":
    typer.run(one_line_errors(main))
