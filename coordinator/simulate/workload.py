"""Offline workloads: how many requests, how long their prompts and outputs are, and the link speed.

Defaults follow DeServe's evaluation (prompt and output lengths uniform in [0, 512]; we start at 1 token).
Lengths are drawn from a seeded generator, so the same workload and seed give the same requests.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from coordinator.scheduling.errors import SchedulingError
from coordinator.scheduling.fields import count, positive

WORKLOAD_FIELDS = frozenset({"requests", "prompt_tokens", "output_tokens", "seed", "link_mb_s"})


@dataclass(frozen=True)
class Workload:
    """`link_mb_s` is the bandwidth of every link between GPUs (activations cross it once per stage)."""

    requests: int = 2000
    prompt_tokens: tuple[int, int] = (1, 512)
    output_tokens: tuple[int, int] = (1, 512)
    seed: int = 0
    link_mb_s: float = 125.0

    def lengths(self) -> tuple[np.ndarray, np.ndarray]:
        """(prompt lengths, output lengths), one per request, drawn from `seed`."""
        rng = np.random.default_rng(self.seed)
        prompts = rng.integers(self.prompt_tokens[0], self.prompt_tokens[1] + 1, self.requests)
        outputs = rng.integers(self.output_tokens[0], self.output_tokens[1] + 1, self.requests)
        return prompts, outputs

    @classmethod
    def from_dict(cls, data: Any) -> Workload:
        if not isinstance(data, dict):
            raise SchedulingError("workload: expected a JSON object")
        unknown = sorted(set(data) - WORKLOAD_FIELDS)
        if unknown:
            raise SchedulingError(f"workload: unknown field {unknown[0]!r}")
        base = cls()
        return cls(
            requests=count(data.get("requests", base.requests), "workload.requests"),
            prompt_tokens=_range(data.get("prompt_tokens", base.prompt_tokens), "workload.prompt_tokens"),
            output_tokens=_range(data.get("output_tokens", base.output_tokens), "workload.output_tokens"),
            seed=count(data.get("seed", base.seed), "workload.seed", 0),
            link_mb_s=positive(data.get("link_mb_s", base.link_mb_s), "workload.link_mb_s"),
        )


def _range(value: Any, where: str) -> tuple[int, int]:
    if not isinstance(value, list | tuple) or len(value) != 2:
        raise SchedulingError(f"{where}: expected [low, high]")
    low, high = count(value[0], f"{where}[0]"), count(value[1], f"{where}[1]")
    if high < low:
        raise SchedulingError(f"{where}: high {high} is below low {low}")
    return low, high
