"""Dynamic membership: GPUs join and leave a running plan, and the plan is rebuilt only when it must be.

- join: the newcomer holds the bottleneck layers (Parallax's rule) as an extra shard; one GPU loads weights.
- leave: its shard goes; a pipeline it was part of dissolves into extra shards that chains can still stitch.
- rebalance (global, Phase 1 again) when a layer is served by nobody, or when the coefficient of variation of
  the layer serving rates exceeds `cv_threshold` (on by default, unlike Parallax's shipped code). Before a
  global rebalance for lost coverage, one spare GPU is moved onto the hole if that alone repairs it.

Every event reports how many GPUs must (re)load weights. A rebuild swaps interchangeable GPUs (same region,
capacity and speed) so that as many as possible keep the layers they already hold.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, replace

from coordinator.scheduling.allocation import AllocationOptions, allocate
from coordinator.scheduling.cluster import Cluster, Gpu
from coordinator.scheduling.costs import reference_layer_ms, step_times
from coordinator.scheduling.coverage import Coverage
from coordinator.scheduling.errors import SchedulingError
from coordinator.scheduling.model import ModelSpec
from coordinator.scheduling.plan import Pipeline, Plan, Stage

DEFAULT_CV_THRESHOLD = 0.5


@dataclass(frozen=True)
class MembershipEvent:
    """What one event did: `reloads` GPUs load new weights; `imbalance` is the CV afterwards."""

    kind: str
    gpu: str | None
    reloads: int
    rebalanced: bool
    imbalance: float


class Membership:
    """A plan kept current as GPUs come and go."""

    def __init__(
        self,
        cluster: Cluster,
        model: ModelSpec,
        options: AllocationOptions | None = None,
        cv_threshold: float = DEFAULT_CV_THRESHOLD,
    ) -> None:
        self.cluster = cluster
        self.model = model
        self.options = options or AllocationOptions()
        self.cv_threshold = cv_threshold
        self.plan = allocate(cluster, model, self.options)
        # kept current event by event, so that a join or a leave costs about its own shards, not the cluster
        self._step_ms = step_times(cluster.gpus, model)
        self._coverage = Coverage(self.plan.shards(), self._step_ms, model)

    def coverage(self) -> Coverage:
        """The layer rates of the current plan (a snapshot)."""
        return self._coverage.copy()

    def join(self, gpu: Gpu) -> MembershipEvent:
        if gpu.id in self._step_ms:
            raise SchedulingError(f"gpu {gpu.id}: already a member")
        if gpu.region not in self.cluster.rtt_ms:
            raise SchedulingError(f"gpu {gpu.id}: region {gpu.region!r} is not in rtt_ms")
        self.cluster = Cluster((*self.cluster.gpus, gpu), self.cluster.rtt_ms)
        self._step_ms.update(step_times([gpu], self.model))
        capacity = self.model.capacity_units(gpu.memory_bytes, self.options.kv_reserve)
        stage = self._coverage.bottleneck_shard(gpu.id, capacity)
        reloads = 0
        if stage is not None:
            self.plan = replace(self.plan, extra=(*self.plan.extra, stage))
            self._coverage.add(stage)
            reloads = 1
        return self._settle("join", gpu.id, reloads)

    def leave(self, gpu_id: str) -> MembershipEvent:
        if gpu_id not in self._step_ms:
            raise SchedulingError(f"gpu {gpu_id}: not a member")
        self.cluster = self.cluster.subset(set(self._step_ms) - {gpu_id})
        kept: list[Pipeline] = []
        extra = [s for s in self.plan.extra if s.gpu != gpu_id]
        for pipeline in self.plan.pipelines:
            if any(s.gpu == gpu_id for s in pipeline.stages):
                extra.extend(s for s in pipeline.stages if s.gpu != gpu_id)
            else:
                kept.append(pipeline)
        for stage in self.plan.shards():
            if stage.gpu == gpu_id:
                self._coverage.remove(stage)
        del self._step_ms[gpu_id]
        self.plan = replace(self.plan, pipelines=tuple(kept), extra=tuple(extra))
        reloads = 0
        if min(self._coverage.rates) == 0.0:
            reloads = self._repair()
        return self._settle("leave", gpu_id, reloads)

    def rebalance(self) -> MembershipEvent:
        """Phase 1 from scratch on the current members, keeping as many shards in place as possible."""
        return MembershipEvent("rebalance", None, self._rebuild(), True, self._coverage.imbalance())

    def _settle(self, kind: str, gpu: str | None, reloads: int) -> MembershipEvent:
        cv = self._coverage.imbalance()
        if cv <= self.cv_threshold:
            return MembershipEvent(kind, gpu, reloads, False, cv)
        reloads += self._rebuild()
        return MembershipEvent(kind, gpu, reloads, True, self._coverage.imbalance())

    def _repair(self) -> int:
        """Moves one spare GPU (unused or holding an extra shard) onto the uncovered layers if that closes
        the hole; returns the GPUs that reload (0 when no single move suffices)."""
        held = {s.gpu for s in self.plan.shards()}
        step_ms = self._step_ms
        spares = [g for g in self.cluster.gpus if g.id not in held]
        spares += [self.cluster.gpu(s.gpu) for s in self.plan.extra]
        for gpu in sorted(spares, key=lambda g: -g.memory_bytes):
            others = [s for s in self.plan.extra if s.gpu != gpu.id]
            trial = replace(self.plan, extra=tuple(others))
            coverage = Coverage(trial.shards(), step_ms, self.model)
            capacity = self.model.capacity_units(gpu.memory_bytes, self.options.kv_reserve)
            stage = coverage.bottleneck_shard(gpu.id, capacity)
            if stage is not None:
                coverage.add(stage)
                if min(coverage.rates) > 0.0:
                    self.plan = replace(trial, extra=(*others, stage))
                    self._coverage = coverage
                    return 1
        return 0

    def _rebuild(self) -> int:
        before = {s.gpu: (s.start, s.end) for s in self.plan.shards()}
        fresh = allocate(self.cluster, self.model, self.options)
        self.plan = keep_in_place(fresh, before, self.cluster, self.model, self.options)
        self._coverage = Coverage(self.plan.shards(), self._step_ms, self.model)
        return sum(1 for s in self.plan.shards() if before.get(s.gpu) != (s.start, s.end))


def keep_in_place(
    plan: Plan,
    before: dict[str, tuple[int, int]],
    cluster: Cluster,
    model: ModelSpec,
    options: AllocationOptions,
) -> Plan:
    """The same plan with interchangeable GPUs swapped so that most of them keep their previous layers."""

    def kind(gpu: Gpu) -> tuple[str, int, float]:
        capacity = model.capacity_units(gpu.memory_bytes, options.kv_reserve)
        return gpu.region, capacity, reference_layer_ms(gpu, model)

    after = {s.gpu: (s.start, s.end) for s in plan.shards()}
    groups: dict[tuple[str, int, float], list[str]] = defaultdict(list)
    for gpu in cluster.gpus:
        groups[kind(gpu)].append(gpu.id)
    rename: dict[str, str] = {}
    for members in groups.values():
        free = {member: after.get(member) for member in members}  # the layers each member is given
        owner: dict[str, str] = {}
        for member in members:  # first, every GPU whose old layers are still handed to the group keeps them
            match = next(
                (slot for slot, layers in free.items() if layers and layers == before.get(member)), None
            )
            if match is not None:
                owner[match] = member
                del free[match]
        rest = [member for member in members if member not in owner.values()]
        for slot, member in zip(sorted(free, key=lambda s: free[s] is None), rest, strict=True):
            owner[slot] = member
        rename.update(owner)

    def moved(stage: Stage) -> Stage:
        return Stage(rename.get(stage.gpu, stage.gpu), stage.start, stage.end)

    pipelines = tuple(Pipeline(tuple(moved(s) for s in p.stages)) for p in plan.pipelines)
    return replace(plan, pipelines=pipelines, extra=tuple(moved(s) for s in plan.extra))
