"""DeServe's microbatch rule, which the coordinator's planner and a miner running a batch alone both apply."""

from __future__ import annotations

import math
from collections.abc import Sequence


def microbatches(stage_ms: Sequence[float], hop_ms: Sequence[float]) -> int:
    """Microbatches in flight so that no stage idles; `hop_ms[i]` is the link after stage i (the last one
    returns to the first)."""
    if not stage_ms or len(hop_ms) != len(stage_ms) or min(stage_ms) <= 0 or min(hop_ms) < 0:
        raise ValueError("need one positive stage time and one non-negative hop per stage")
    return max(1, math.ceil((sum(stage_ms) + sum(hop_ms)) / max(stage_ms) - 1e-9))
