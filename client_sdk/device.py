"""What a miner tells the coordinator about its device when it joins: the planner's inputs, measured."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class DeviceProfile:
    gpu: str
    memory_gb: float  # memory lent to the market
    tflops: float
    mem_bandwidth_gb_s: float
    layer_latency_ms: float  # a decode step of one layer at batch 1

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)
