"""The reference data shipped inside the package (sources in README.md): read once, never written."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from types import MappingProxyType
from typing import Any


def _load(name: str) -> Any:
    return json.loads(resources.files(__name__).joinpath(name).read_text(encoding="utf-8"))


@cache
def default_rtt_ms() -> MappingProxyType[str, MappingProxyType[str, float]]:
    """Round-trip milliseconds between AWS regions (cloudping.co p50), read-only."""
    data = _load("aws_region_latency_p50.json")["data"]
    return MappingProxyType(
        {a: MappingProxyType({b: float(ms) for b, ms in row.items()}) for a, row in data.items()}
    )


@cache
def gpu_type_figures() -> MappingProxyType[str, MappingProxyType[str, float]]:
    """{type: {"vram_gb", "mem_bandwidth_gb_s", "tflops"}} for the GPU types we know, read-only."""
    types = _load("gpu_types.json")["types"]
    return MappingProxyType({name: MappingProxyType(dict(figures)) for name, figures in types.items()})
