"""Per-layer serving capacity of a set of shards, its imbalance, and where a new GPU relieves it most.

A shard holding n layers on a GPU that needs t ms per layer completes a decode step every n*t ms, so each of
its layers gains a serving rate of 1/(n*t) steps per ms; a layer's rate sums over the shards holding it. The
bottleneck layers are those with the lowest rate, and the coefficient of variation of the rates measures
imbalance (it triggers a global rebalance past a threshold).
"""

from __future__ import annotations

import bisect
import copy
import math
from collections import Counter
from collections.abc import Iterable, Mapping
from itertools import accumulate

from coordinator.scheduling.model import ModelSpec
from coordinator.scheduling.plan import Stage

# Reliefs (decode steps per ms, of the order of 1 / step_ms) are compared to this many decimals, so the same
# relief summed in another order ties exactly and the tie-break on length decides.
RELIEF_DIGITS = 12
# Rates below this (decode steps per ms) are rounding noise: the layer is held by nobody.
ZERO_RATE = 1e-12


class Coverage:
    """Layer rates of a changing set of shards; `step_ms[gpu]` is that GPU's time per layer."""

    def __init__(self, shards: Iterable[Stage], step_ms: Mapping[str, float], model: ModelSpec) -> None:
        self.model = model
        self.step_ms = step_ms
        changes = [0.0] * (model.num_layers + 1)  # a shard's rate starts at its first layer, stops at its end
        self._bound_uses: Counter[int] = Counter()  # how many shards start or end at each bound
        for stage in shards:
            rate = 1.0 / (stage.layers * step_ms[stage.gpu])
            changes[stage.start] += rate
            changes[stage.end] -= rate
            self._bound_uses.update((stage.start, stage.end))
        # a layer nobody holds is exactly zero, not rounding noise
        self.rates = [r if r > ZERO_RATE else 0.0 for r in accumulate(changes[:-1])]
        self.bounds = sorted({0, model.num_layers, *self._bound_uses})

    def add(self, stage: Stage) -> None:
        rate = 1.0 / (stage.layers * self.step_ms[stage.gpu])
        for layer in range(stage.start, stage.end):
            self.rates[layer] += rate
        for bound in (stage.start, stage.end):
            self._bound_uses[bound] += 1
            i = bisect.bisect_left(self.bounds, bound)
            if i == len(self.bounds) or self.bounds[i] != bound:
                self.bounds.insert(i, bound)

    def remove(self, stage: Stage) -> None:
        """Takes away a shard added before (a GPU left), in time linear in its layers."""
        rate = 1.0 / (stage.layers * self.step_ms[stage.gpu])
        for layer in range(stage.start, stage.end):
            left = self.rates[layer] - rate
            self.rates[layer] = left if left > ZERO_RATE else 0.0
        for bound in (stage.start, stage.end):
            self._bound_uses[bound] -= 1
            if not self._bound_uses[bound]:
                del self._bound_uses[bound]
                if bound not in (0, self.model.num_layers):
                    self.bounds.remove(bound)

    def copy(self) -> Coverage:
        """A snapshot that later changes to this one leave as it is."""
        twin = copy.copy(self)
        twin.rates = list(self.rates)
        twin.bounds = list(self.bounds)
        twin._bound_uses = Counter(self._bound_uses)
        return twin

    def imbalance(self) -> float:
        """Coefficient of variation of the layer rates (infinite when a layer is not served at all)."""
        if min(self.rates) == 0.0:
            return float("inf")
        mean = sum(self.rates) / len(self.rates)
        variance = sum((r - mean) ** 2 for r in self.rates) / len(self.rates)
        return math.sqrt(variance) / mean

    def bottleneck_shard(self, gpu: str, capacity_units: int) -> Stage | None:
        """The shard for `gpu` that best lifts the weakest layers (Parallax's join rule: fill the bottleneck).

        Candidates contain the weakest layer and start and end on existing shard boundaries, so chains can
        switch onto and off the new shard; for each start, the shortest and the longest end that fit. The
        winner relieves most imbalance: the sum over its layers of the rate it adds, each capped at what
        lifts that layer to the strongest one (ties: more layers). None when nothing fits.
        """
        model, rates, bounds = self.model, self.rates, self.bounds
        weakest = rates.index(min(rates))
        ceiling = max(rates)
        # rates are constant between consecutive bounds: relief is summed per segment, not per layer
        room = [ceiling - rates[bounds[s]] for s in range(len(bounds) - 1)]
        split = bisect.bisect_right(bounds, weakest)  # bounds[split - 1] <= weakest < bounds[split]
        best: tuple[float, int, Stage] | None = None
        for i in range(split - 1, -1, -1):
            a = bounds[i]
            head = model.embedding_units if a == 0 else 0
            if weakest + 1 - a + head > capacity_units:
                break
            ends = []  # units grow with the end, so the ends that fit are a run from bounds[split]
            for j in range(split, len(bounds)):
                tail = model.head_units if bounds[j] == model.num_layers else 0
                if bounds[j] - a + head + tail > capacity_units:
                    break
                ends.append(j)
            for j in {ends[0], ends[-1]} if ends else ():
                b = bounds[j]
                gain = 1.0 / ((b - a) * self.step_ms[gpu])
                relief = sum((bounds[s + 1] - bounds[s]) * min(gain, room[s]) for s in range(i, j))
                score = (round(relief, RELIEF_DIGITS), b - a)  # rounded, so equal reliefs tie exactly
                if best is None or score > best[:2]:
                    best = (*score, Stage(gpu, a, b))
        return None if best is None else best[2]
