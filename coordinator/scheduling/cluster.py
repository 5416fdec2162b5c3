"""Cluster descriptions: GPUs (type, memory, speed, region) and the round-trip latency between regions.

A cluster file is JSON: `{"gpus": [{"id", "type", "region", "vram_gb", "tflops", "mem_bandwidth_gb_s",
"memory_fraction"?, "layer_latency_ms"?}], "rtt_ms"?: {region: {region: ms}}}`. The figures of a known type
(`data/gpu_types.json`) may be left out; `rtt_ms` defaults to the AWS inter-region matrix in `data/`.
Every validation error is one line that names the offending field, e.g. `gpus[2].vram_gb: must be positive`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from coordinator.scheduling.data import default_rtt_ms, gpu_type_figures
from coordinator.scheduling.errors import SchedulingError
from coordinator.scheduling.fields import number, positive, text

GIB = 1024**3
FIGURES = ("vram_gb", "tflops", "mem_bandwidth_gb_s")
GPU_FIELDS = frozenset({"id", "type", "region", *FIGURES, "memory_fraction", "layer_latency_ms"})


@dataclass(frozen=True)
class Gpu:
    """One GPU. `memory_fraction` is the share of its memory the owner lends; `layer_latency_ms` is a measured
    per-layer decode time at batch 1 that, when given, replaces the estimate from the datasheet figures."""

    id: str
    type: str
    region: str
    vram_gb: float
    tflops: float
    mem_bandwidth_gb_s: float
    memory_fraction: float = 1.0
    layer_latency_ms: float | None = None

    @property
    def memory_bytes(self) -> float:
        """Bytes this GPU lends to the market."""
        return self.vram_gb * GIB * self.memory_fraction

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "type": self.type,
            "region": self.region,
            "vram_gb": self.vram_gb,
            "tflops": self.tflops,
            "mem_bandwidth_gb_s": self.mem_bandwidth_gb_s,
            "memory_fraction": self.memory_fraction,
        }
        if self.layer_latency_ms is not None:
            out["layer_latency_ms"] = self.layer_latency_ms
        return out


@dataclass(frozen=True)
class Cluster:
    """GPUs plus round-trip milliseconds between regions (`rtt_ms[a][b]`; the diagonal is in-region)."""

    gpus: tuple[Gpu, ...]
    rtt_ms: Mapping[str, Mapping[str, float]]
    _index: dict[str, Gpu] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_index", {gpu.id: gpu for gpu in self.gpus})

    def gpu(self, gpu_id: str) -> Gpu:
        return self._index[gpu_id]

    def rtt(self, a: str, b: str) -> float:
        """Round trip between regions a and b (the reverse direction when only that one is known)."""
        try:
            return self.rtt_ms[a][b]
        except KeyError:
            return self.rtt_ms[b][a]

    def one_way_ms(self, a: str, b: str) -> float:
        """One-way latency between GPUs `a` and `b` (ids): half the regions' round trip, zero for one GPU."""
        if a == b:
            return 0.0
        return self.rtt(self._index[a].region, self._index[b].region) / 2.0

    def subset(self, gpu_ids: set[str]) -> Cluster:
        """The same cluster restricted to `gpu_ids`, in the original order."""
        return Cluster(tuple(g for g in self.gpus if g.id in gpu_ids), self.rtt_ms)

    def to_dict(self) -> dict[str, Any]:
        rtt = {a: dict(row) for a, row in self.rtt_ms.items()}
        return {"gpus": [gpu.to_dict() for gpu in self.gpus], "rtt_ms": rtt}

    @classmethod
    def from_dict(cls, data: Any) -> Cluster:
        """Validates a parsed cluster file; raises SchedulingError naming the first bad field."""
        if not isinstance(data, dict) or not isinstance(data.get("gpus"), list):
            raise SchedulingError('cluster: expected a JSON object with a "gpus" list')
        unknown = sorted(set(data) - {"gpus", "rtt_ms"})
        if unknown:
            raise SchedulingError(f"cluster: unknown field {unknown[0]!r}")
        if not data["gpus"]:
            raise SchedulingError("gpus: the cluster has no GPUs")
        rtt = _parse_rtt(data["rtt_ms"]) if "rtt_ms" in data else default_rtt_ms()
        gpus: list[Gpu] = []
        seen: set[str] = set()
        for i, raw in enumerate(data["gpus"]):
            gpu = _parse_gpu(raw, f"gpus[{i}]", rtt)
            if gpu.id in seen:
                raise SchedulingError(f"gpus[{i}].id: duplicate id {gpu.id!r}")
            seen.add(gpu.id)
            gpus.append(gpu)
        regions = sorted({g.region for g in gpus})
        for a in regions:
            for b in regions:
                if b not in rtt.get(a, {}) and a not in rtt.get(b, {}):
                    raise SchedulingError(f"rtt_ms: no latency between regions {a!r} and {b!r}")
        return cls(tuple(gpus), rtt)


def _parse_gpu(raw: Any, where: str, rtt: Mapping[str, Mapping[str, float]]) -> Gpu:
    if not isinstance(raw, dict):
        raise SchedulingError(f"{where}: expected an object")
    unknown = sorted(set(raw) - GPU_FIELDS)
    if unknown:
        raise SchedulingError(f"{where}: unknown field {unknown[0]!r}")
    gpu_id = text(raw, "id", where)
    gpu_type = text(raw, "type", where)
    region = text(raw, "region", where)
    if region not in rtt:
        raise SchedulingError(f"{where}.region: {region!r} is not a region of rtt_ms")
    known: Mapping[str, float] = gpu_type_figures().get(gpu_type, {})
    figures: dict[str, float] = {}
    for name in FIGURES:
        if name in raw:
            figures[name] = positive(raw[name], f"{where}.{name}")
        elif name in known:
            figures[name] = float(known[name])
        else:
            raise SchedulingError(f"{where}.type: unknown GPU type {gpu_type!r} and no {name} given")
    fraction = positive(raw.get("memory_fraction", 1.0), f"{where}.memory_fraction")
    if fraction > 1.0:
        raise SchedulingError(f"{where}.memory_fraction: must be in (0, 1], got {fraction:g}")
    latency = raw.get("layer_latency_ms")
    return Gpu(
        id=gpu_id,
        type=gpu_type,
        region=region,
        memory_fraction=fraction,
        layer_latency_ms=None if latency is None else positive(latency, f"{where}.layer_latency_ms"),
        **figures,
    )


def _parse_rtt(raw: Any) -> dict[str, dict[str, float]]:
    if not isinstance(raw, dict):
        raise SchedulingError("rtt_ms: expected an object {region: {region: ms}}")
    out: dict[str, dict[str, float]] = {}
    for a, row in raw.items():
        if not isinstance(row, dict):
            raise SchedulingError(f"rtt_ms.{a}: expected an object {{region: ms}}")
        out[a] = {}
        for b, ms in row.items():
            value = number(ms, f"rtt_ms.{a}.{b}")
            if value < 0:
                raise SchedulingError(f"rtt_ms.{a}.{b}: must not be negative, got {value:g}")
            out[a][b] = value
    return out
