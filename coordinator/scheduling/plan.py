"""Plans: which GPU holds which decoder layers, grouped into pipelines, and how requests pick a chain.

Layer ranges are zero-based and half-open. A pipeline's first stage also holds the embedding and its last the
LM head. `extra` holds shards outside the pipelines (GPUs placed on the bottleneck layers); chain selection
over the shard DAG can use them, fixed-pipeline round-robin cannot.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from coordinator.scheduling.cluster import Cluster
from coordinator.scheduling.errors import SchedulingError
from coordinator.scheduling.model import DEFAULT_KV_RESERVE, ModelSpec

Routing = Literal["dag", "round-robin", "petals"]


@dataclass(frozen=True)
class Stage:
    """GPU `gpu` (its id) holds decoder layers [start, end)."""

    gpu: str
    start: int
    end: int

    @property
    def layers(self) -> int:
        return self.end - self.start

    def to_json(self) -> dict[str, Any]:
        return {"gpu": self.gpu, "layers": [self.start, self.end]}


@dataclass(frozen=True)
class Pipeline:
    stages: tuple[Stage, ...]

    @property
    def gpus(self) -> tuple[str, ...]:
        return tuple(stage.gpu for stage in self.stages)


@dataclass(frozen=True)
class Plan:
    """A placement plus the routing it is meant to be served with; `notes` are strategy-specific facts."""

    strategy: str
    num_layers: int
    pipelines: tuple[Pipeline, ...]
    extra: tuple[Stage, ...] = ()
    routing: Routing = "dag"
    notes: dict[str, Any] = field(default_factory=dict, compare=False)

    def shards(self) -> Iterator[Stage]:
        for pipeline in self.pipelines:
            yield from pipeline.stages
        yield from self.extra

    @property
    def gpus(self) -> set[str]:
        return {stage.gpu for stage in self.shards()}

    def validate(self, cluster: Cluster, model: ModelSpec, kv_reserve: float = DEFAULT_KV_RESERVE) -> None:
        """Raises SchedulingError unless every pipeline covers [0, L) once, contiguously, no GPU holds two
        shards, and every shard (with the embedding or head it carries) fits its GPU's capacity."""
        seen: set[str] = set()
        for p, pipeline in enumerate(self.pipelines):
            position = 0
            for stage in pipeline.stages:
                if stage.start != position or stage.end <= stage.start:
                    raise SchedulingError(f"pipelines[{p}]: {stage.gpu} holds [{stage.start}, {stage.end})")
                position = stage.end
            if position != self.num_layers:
                raise SchedulingError(f"pipelines[{p}]: covers [0, {position}) of {self.num_layers} layers")
        for stage in self.shards():
            if stage.gpu in seen:
                raise SchedulingError(f"gpu {stage.gpu}: holds more than one shard")
            seen.add(stage.gpu)
            if not 0 <= stage.start < stage.end <= self.num_layers:
                raise SchedulingError(f"gpu {stage.gpu}: layers [{stage.start}, {stage.end}) out of range")
            units = shard_units(stage, model)
            capacity = model.capacity_units(cluster.gpu(stage.gpu).memory_bytes, kv_reserve)
            if units > capacity:
                raise SchedulingError(f"gpu {stage.gpu}: needs {units} layer units, holds {capacity}")

    def to_json(self, metrics: dict[str, Any]) -> dict[str, Any]:
        """`{"strategy", "pipelines": [{"stages": [{"gpu", "layers": [start, end)}]}], "metrics"}`."""
        return {
            "strategy": self.strategy,
            "pipelines": [{"stages": [s.to_json() for s in p.stages]} for p in self.pipelines],
            "metrics": metrics,
        }


def shard_units(stage: Stage, model: ModelSpec) -> int:
    """Layer units a shard occupies: its layers, plus the embedding on layer 0 and the head on the last."""
    units = stage.layers
    if stage.start == 0:
        units += model.embedding_units
    if stage.end == model.num_layers:
        units += model.head_units
    return units
