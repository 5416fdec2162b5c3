"""The faulty miner's corruptions, the BATCHMARKET_TEST_CORRUPT switch, and `miner serve`'s executor obeying
it."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import torch

from client_sdk.protocol.sampling import SamplingParams
from miner.engine.engine import Engine
from miner.model.config import ModelConfig
from miner.model.shard import StageShard
from miner.node.executor import HeadExecutor
from miner.verify.corrupt import (
    ENV,
    CorruptionSwitch,
    bfloat16_kv_cache,
    from_environment,
    substitute,
    truncate,
    wrong_temperature,
)
from tests.miner.nodes import reader_for, stage_hosts

STOP = 3


def test_substitute_changes_exactly_one_token() -> None:
    rng = random.Random(0)
    for _ in range(200):
        output = [rng.randrange(5) for _ in range(rng.randint(1, 6))]
        corrupted = substitute(output, 5, rng)
        assert sum(a != b for a, b in zip(output, corrupted, strict=True)) == 1
        assert all(0 <= t < 5 for t in corrupted)


def test_truncate_cuts_before_the_end_and_never_on_a_stop_token() -> None:
    params = SamplingParams(max_tokens=6, stop_token_ids=(STOP,))
    rng = random.Random(0)
    for output in ([1, 2, STOP, 4, 5, 6], [1, 2, 4, STOP], [7]):
        for _ in range(20):
            cut = truncate(output, params, rng)
            assert len(cut) < len(output) and list(output[: len(cut)]) == cut
            assert not cut or cut[-1] != STOP


def test_wrong_temperature() -> None:
    assert wrong_temperature(SamplingParams(temperature=0.0)).temperature == 1.0
    assert wrong_temperature(SamplingParams(temperature=0.7)).temperature == 1.4


def test_switch_is_read_only_when_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    assert from_environment() is None
    monkeypatch.setenv(ENV, "substitute:0.5")
    assert from_environment() == CorruptionSwitch("substitute", 0.5)
    monkeypatch.setenv(ENV, "other_checkpoint:1:/models/other")
    assert from_environment() == CorruptionSwitch("other_checkpoint", 1.0, Path("/models/other"))
    for bad in ("swap:0.5", "other_checkpoint:1"):
        monkeypatch.setenv(ENV, bad)
        with pytest.raises(ValueError, match=ENV):
            from_environment()


def request(custom_id: str, prompt: str) -> dict[str, object]:
    body = {"model": "tiny", "prompt": prompt, "max_tokens": 12, "temperature": 0}
    line = {"custom_id": custom_id, "method": "POST", "url": "/v1/completions", "body": body}
    return {"line": json.dumps(line)}


@pytest.mark.parametrize("kind", ["substitute", "truncate", "other_checkpoint", "wrong_temperature"])
def test_executor_corrupts_the_chosen_lines_only(
    kind: str, checkpoint: Path, other_checkpoint: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = [{**request(f"line-{i}", f"The quick brown fox {i}"), "index": i} for i in range(8)]
    monkeypatch.setenv(ENV, f"{kind}:0.5:{other_checkpoint}" if kind == "other_checkpoint" else f"{kind}:0.5")
    switch = from_environment()
    assert switch is not None
    chosen = {i for i in range(8) if switch.chooses(f"line-{i}")}
    assert 0 < len(chosen) < 8
    reader = reader_for(checkpoint)
    with stage_hosts(checkpoint, [(0, 2), (2, 4)]) as [head, _]:
        assert head.driver is not None
        honest = dict(HeadExecutor(reader).run(1, lines, head.driver))
        faulty = dict(HeadExecutor(reader, switch).run(2, lines, head.driver))
    assert {i for i in range(8) if faulty[i].output != honest[i].output} == chosen
    assert all(faulty[i].prompt == honest[i].prompt for i in range(8))


def test_a_bfloat16_kv_cache_keeps_keys_and_values_at_bfloat16_precision(checkpoint: Path) -> None:
    layers = ModelConfig.load(checkpoint).num_layers
    plain = Engine([StageShard.load(checkpoint, 0, layers)], page_size=4, local_pages=64)
    cheap = Engine([bfloat16_kv_cache(StageShard.load(checkpoint, 0, layers))], page_size=4, local_pages=64)
    for engine in (plain, cheap):
        engine.generate([[5, 17, 99, 3]], [SamplingParams(max_tokens=6)])
    for engine, rounded in ((plain, False), (cheap, True)):
        for cache in engine.pipeline.caches:
            for stored in (cache.device_cache.keys, cache.device_cache.values):
                assert stored.abs().sum() > 0
                assert torch.equal(stored, stored.bfloat16().float()) == rounded
