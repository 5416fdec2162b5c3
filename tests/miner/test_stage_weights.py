"""A stage counts the weight memory it holds: every tensor once, packed copies included (bench/_memory.py
checks a stage's measured peak against this budget)."""

from __future__ import annotations

from pathlib import Path

from safetensors.torch import load_file

from miner.model.shard import StageShard
from tests.miner.checkpoints import build_checkpoint


def checkpoint_bytes(directory: Path, wanted: str = "") -> int:
    tensors = load_file(directory / "model.safetensors")
    return sum(t.nbytes for name, t in tensors.items() if wanted in name)


def test_the_whole_model_on_one_stage_holds_its_tied_head_twice(tmp_path: Path) -> None:
    checkpoint = build_checkpoint("llama", tmp_path, tie_word_embeddings=True, num_hidden_layers=2)
    shard = StageShard.load(checkpoint, 0, 2)
    embedding = checkpoint_bytes(checkpoint, "embed_tokens")
    # the LM head multiplies by a packed copy of the embedding, which the first layer's lookup still needs
    expected = checkpoint_bytes(checkpoint) + (embedding if shard.head and shard.head.packed else 0)
    assert shard.weight_bytes == expected


def test_stages_hold_their_own_layers_only(tmp_path: Path) -> None:
    checkpoint = build_checkpoint("llama", tmp_path, tie_word_embeddings=False, num_hidden_layers=2)
    first, last = StageShard.load(checkpoint, 0, 1), StageShard.load(checkpoint, 1, 2)
    assert first.weight_bytes == checkpoint_bytes(checkpoint, "layers.0.") + checkpoint_bytes(
        checkpoint, "embed_tokens"
    )
    assert last.weight_bytes == checkpoint_bytes(checkpoint, "layers.1.") + checkpoint_bytes(
        checkpoint, "model.norm"
    ) + checkpoint_bytes(checkpoint, "lm_head")
