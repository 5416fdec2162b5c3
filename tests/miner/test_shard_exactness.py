"""Greedy output of our shards equals Hugging Face transformers token for token, for every family and every
stage split, on batches of prompts of different lengths."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM

from miner.local_pipeline import LocalPipeline
from miner.model.shard import StageShard
from tests.miner.checkpoints import FAMILIES, build_checkpoint

PROMPTS = [[5, 17, 99, 3, 42, 8, 77], [1, 2], [100, 64, 32, 16, 8, 4, 2, 1, 9, 27, 81, 11, 13]]
NEW_TOKENS = 12
SPLITS = {1: [(0, 4)], 2: [(0, 2), (2, 4)], 3: [(0, 1), (1, 3), (3, 4)], 4: [(0, 1), (1, 2), (2, 3), (3, 4)]}


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def checkpoint(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_checkpoint(request.param, tmp_path_factory.mktemp(request.param))


def hf_greedy(checkpoint: Path, prompt: list[int]) -> list[int]:
    model = AutoModelForCausalLM.from_pretrained(checkpoint, dtype=torch.float32)
    out = model.generate(
        torch.tensor([prompt]), max_new_tokens=NEW_TOKENS, do_sample=False, eos_token_id=None, pad_token_id=0
    )
    return out[0, len(prompt) :].tolist()


@pytest.mark.parametrize("stages", sorted(SPLITS))
def test_greedy_matches_transformers(checkpoint: Path, stages: int) -> None:
    expected = [hf_greedy(checkpoint, p) for p in PROMPTS]
    assert len({tuple(e) for e in expected}) > 1, "degenerate checkpoint: every prompt gives the same output"
    shards = [StageShard.load(checkpoint, start, end) for start, end in SPLITS[stages]]
    # 8 pages of 4 tokens per sequence at most: forces block tables to span several, non-adjacent pages
    pipeline = LocalPipeline(shards, num_pages=24, page_size=4)
    assert pipeline.generate_greedy(PROMPTS, NEW_TOKENS) == expected
    assert pipeline.blocks.free_pages == 24
