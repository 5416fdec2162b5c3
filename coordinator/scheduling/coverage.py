"""Per-layer serving capacity of a set of shards, its imbalance, and where a new GPU relieves it most.

A shard holding n layers on a GPU that needs t ms per layer completes a decode step every n*t ms, so each of
its layers gains a serving rate of 1/(n*t) steps per ms; a layer's rate sums over the shards holding it. The
bottleneck layers are those with the lowest rate, and the coefficient of variation of the rates measures
imbalance (it triggers a global rebalance past a threshold).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping

import numpy as np

from coordinator.scheduling.model import ModelSpec
from coordinator.scheduling.plan import Stage


class Coverage:
    """Layer rates of a growing set of shards; `step_ms[gpu]` is that GPU's time per layer."""

    def __init__(self, shards: Iterable[Stage], step_ms: Mapping[str, float], model: ModelSpec) -> None:
        self.model = model
        self.step_ms = step_ms
        changes = np.zeros(model.num_layers + 1)  # rate steps up at a shard's start and down at its end
        bounds = {0, model.num_layers}
        for stage in shards:
            rate = 1.0 / (stage.layers * step_ms[stage.gpu])
            changes[stage.start] += rate
            changes[stage.end] -= rate
            bounds.update((stage.start, stage.end))
        self.rates = np.cumsum(changes[:-1])
        self.rates[self.rates < 1e-12] = 0.0  # a layer nobody holds: exactly zero, not rounding noise
        self.bounds = sorted(bounds)

    def add(self, stage: Stage) -> None:
        self.rates[stage.start : stage.end] += 1.0 / (stage.layers * self.step_ms[stage.gpu])
        for bound in (stage.start, stage.end):
            i = bisect.bisect_left(self.bounds, bound)
            if i == len(self.bounds) or self.bounds[i] != bound:
                self.bounds.insert(i, bound)

    def imbalance(self) -> float:
        """Coefficient of variation of the layer rates (infinite when a layer is not served at all)."""
        mean = float(self.rates.mean())
        if float(self.rates.min()) == 0.0:
            return float("inf")
        return float(self.rates.std() / mean)

    def bottleneck_shard(self, gpu: str, capacity_units: int) -> Stage | None:
        """The shard for `gpu` that best lifts the weakest layers (Parallax's join rule: fill the bottleneck).

        Candidates start and end on existing shard boundaries, so chains can switch onto and off the new
        shard, and contain the weakest layer. The winner relieves most imbalance: the sum over its layers of
        the rate it adds, each capped at what lifts that layer to the strongest one (ties: more layers).
        None when nothing fits.
        """
        model = self.model
        weakest = int(np.argmin(self.rates))
        ceiling = float(self.rates.max())
        split = bisect.bisect_right(self.bounds, weakest)
        best: tuple[float, int, Stage] | None = None
        for a in reversed(self.bounds[:split]):
            head = model.embedding_units if a == 0 else 0
            if weakest + 1 - a + head > capacity_units:
                break
            for b in self.bounds[split:]:
                units = b - a + head + (model.head_units if b == model.num_layers else 0)
                if units > capacity_units:
                    break
                gain = 1.0 / ((b - a) * self.step_ms[gpu])
                relief = float(np.minimum(gain, ceiling - self.rates[a:b]).sum())
                if best is None or (relief, b - a) > best[:2]:
                    best = (relief, b - a, Stage(gpu, a, b))
        return None if best is None else best[2]
