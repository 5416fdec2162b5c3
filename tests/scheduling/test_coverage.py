"""Layer serving rates and the join rule: the shard a new GPU takes is the one that relieves the weakest
layers most, scored layer by layer as the docstring of `Coverage.bottleneck_shard` defines it."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from bench._clusters import QWEN3_32B
from coordinator.scheduling.coverage import RELIEF_DIGITS, Coverage
from coordinator.scheduling.model import ModelSpec
from coordinator.scheduling.plan import Stage

MODEL = ModelSpec.from_hf_config(QWEN3_32B)
L = MODEL.num_layers


def relief(coverage: Coverage, stage: Stage) -> float:
    """The definition, one layer at a time: the rate the shard adds, capped at what lifts each of its layers
    to the strongest one."""
    gain = 1.0 / (stage.layers * coverage.step_ms[stage.gpu])
    ceiling = max(coverage.rates)
    return sum(min(gain, ceiling - rate) for rate in coverage.rates[stage.start : stage.end])


def candidates(coverage: Coverage, gpu: str, capacity: int) -> list[Stage]:
    """Shards on existing boundaries that hold the weakest layer and fit; per start, the shortest and the
    longest end."""
    weakest = coverage.rates.index(min(coverage.rates))
    out = []
    for a in (b for b in coverage.bounds if b <= weakest):
        head = MODEL.embedding_units if a == 0 else 0
        ends = [
            b
            for b in coverage.bounds
            if b > weakest and b - a + head + (MODEL.head_units if b == L else 0) <= capacity
        ]
        if ends:
            out.extend(Stage(gpu, a, b) for b in {min(ends), max(ends)})
    return out


@st.composite
def shard_sets(draw: st.DrawFn) -> tuple[list[Stage], dict[str, float], int]:
    cuts = sorted(draw(st.sets(st.integers(1, L - 1), max_size=6)))
    pipeline = [Stage(f"p{i}", a, b) for i, (a, b) in enumerate(zip([0, *cuts], [*cuts, L], strict=True))]
    extra = []
    for i in range(draw(st.integers(0, 4))):
        a = draw(st.integers(0, L - 1))
        extra.append(Stage(f"x{i}", a, draw(st.integers(a + 1, L))))
    step_ms = {s.gpu: draw(st.sampled_from([0.5, 1.0, 1.5, 3.0])) for s in [*pipeline, *extra]}
    step_ms["new"] = draw(st.sampled_from([0.5, 1.0, 2.0]))
    return pipeline + extra, step_ms, draw(st.integers(1, L + 4))


@settings(max_examples=200, deadline=None)
@given(shard_sets())
def test_the_new_shard_relieves_most(case: tuple[list[Stage], dict[str, float], int]) -> None:
    shards, step_ms, capacity = case
    coverage = Coverage(shards, step_ms, MODEL)
    options = candidates(coverage, "new", capacity)
    chosen = coverage.bottleneck_shard("new", capacity)
    if not options:
        assert chosen is None
        return
    assert chosen in options

    def score(stage: Stage) -> tuple[float, int]:  # most relief, then more layers
        return round(relief(coverage, stage), RELIEF_DIGITS), stage.layers

    assert score(chosen) == max(map(score, options))


def test_rates_add_per_layer_and_an_empty_layer_is_infinitely_imbalanced() -> None:
    coverage = Coverage([Stage("a", 0, 32), Stage("b", 32, 64)], {"a": 1.0, "b": 2.0, "c": 1.0}, MODEL)
    assert coverage.rates[0] == 1 / 32 and coverage.rates[63] == 1 / 64
    assert math.isclose(coverage.imbalance(), (1 / 32 - 1 / 64) / 2 / ((1 / 32 + 1 / 64) / 2))
    coverage.add(Stage("c", 16, 48))
    assert coverage.rates[20] == 1 / 32 + 1 / 32 and coverage.bounds == [0, 16, 32, 48, 64]
    assert Coverage([Stage("a", 0, 32)], {"a": 1.0}, MODEL).imbalance() == math.inf
