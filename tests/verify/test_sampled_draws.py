"""Sampled lines are the same whatever the batch, the paging and the stage split, and the reference draws the
very tokens the engine drew: the noise depends only on the seed, the position and the token."""

from __future__ import annotations

from pathlib import Path

import pytest

from miner.engine.engine import Engine
from miner.model.config import ModelConfig
from miner.model.shard import StageShard
from miner.pipeline.processes import even_split
from miner.verify.rescore import Claim, Rescorer


@pytest.mark.parametrize(("stages", "page_size", "max_seqs"), [(1, 16, 1), (2, 4, 2), (4, 8, 16)])
def test_sampled_lines_do_not_depend_on_batching_paging_or_stages(
    checkpoint: Path, sampled_claims: list[Claim], stages: int, page_size: int, max_seqs: int
) -> None:
    splits = even_split(ModelConfig.load(checkpoint).num_layers, stages)
    engine = Engine(
        [StageShard.load(checkpoint, start, end) for start, end in splits],
        page_size=page_size,
        local_pages=256,
        max_seqs=max_seqs,
    )
    outputs = engine.generate([list(c.prompt) for c in sampled_claims], [c.params for c in sampled_claims])
    assert outputs == [list(c.output) for c in sampled_claims]


def test_the_reference_draws_every_token_an_honest_miner_drew(
    rescorer: Rescorer, sampled_claims: list[Claim]
) -> None:
    for claim, scores in zip(sampled_claims, rescorer.score(sampled_claims), strict=True):
        assert [s.chosen for s in scores] == list(claim.output)
        assert all(s.gap <= 0 for s in scores)
