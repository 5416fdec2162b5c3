"""Discrete-event simulation of an offline batch served under a plan.

Every request of the workload is waiting at time zero. The router of the plan (the shard-DAG DP, fixed
pipelines in turn, or Petals' span routing) admits a request onto a chain when every GPU of the chain has KV
room for its whole prompt and output; it stays there until done. Each chain runs DeServe's number of
microbatches in flight (at most 36, the most DeServe's code sets by hand). A microbatch repeats decode steps:
it visits the chain's stages in order, crosses each link (one-way latency plus activation bytes over the link
bandwidth) and returns the sampled tokens to the first stage. A GPU runs everything waiting for it as one
batch (layers x per-layer time at that batch and context), so weights are read once per batch. New requests
join a microbatch at its next step and are prefilled in it.

Nothing is random but the workload's lengths, which come from its seed; ties between events break by
creation order, so the same inputs give the same numbers.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from client_sdk.protocol.pipeline import microbatches
from coordinator.scheduling.cluster import Cluster
from coordinator.scheduling.costs import layer_ms, step_times
from coordinator.scheduling.model import ModelSpec
from coordinator.scheduling.plan import Plan, Stage, shard_units
from coordinator.scheduling.routing import RoundRobin, ShardGraph, SpanGraph
from coordinator.simulate.workload import Workload

RUNTIME_FRACTION = 0.05  # of each GPU's memory for activations and the framework
MAX_BATCH = 128  # sequences per microbatch
MAX_MICROBATCHES = 36  # the most DeServe's code sets by hand (at 256 ms between stages)
PETALS_REFRESH_MS = 1000.0  # how old the loads a Petals client routes on may be


@dataclass(frozen=True)
class SimResult:
    requests: int
    completed: int
    output_tokens: int
    makespan_s: float
    throughput_tokens_s: float  # steady state (_steady_rate); output_tokens / makespan_s counts the drain too
    latency_p50_s: float
    latency_p99_s: float
    tpot_ms_mean: float
    gpu_utilization: float
    serving_gpu_utilization: float
    chains: int

    def to_json(self) -> dict[str, Any]:
        return {k: round(v, 4) if isinstance(v, float) else v for k, v in self.__dict__.items()}


@dataclass(eq=False)
class _Request:
    prompt: int
    output: int
    generated: int = 0
    admitted: float = 0.0
    first_token: float = 0.0
    finished: float = 0.0
    chain: _Chain | None = None


@dataclass(eq=False)
class _Group:
    chain: _Chain
    active: list[_Request] = field(default_factory=list)
    joining: list[_Request] = field(default_factory=list)
    running: bool = False
    step: tuple[float, float, float] = (0.0, 0.0, 0.0)  # tokens, cached tokens read, attention pairs

    @property
    def size(self) -> int:
        return len(self.active) + len(self.joining)


@dataclass(eq=False)
class _Chain:
    stages: tuple[Stage, ...]
    hops_ms: tuple[float, ...]  # one-way latency after each stage; the last returns to the first
    groups: list[_Group] = field(default_factory=list)


class _Simulation:
    def __init__(self, plan: Plan, cluster: Cluster, model: ModelSpec, workload: Workload) -> None:
        self.plan, self.cluster, self.model, self.workload = plan, cluster, model, workload
        self.step_ms = step_times(cluster.gpus, model)
        self.shards = self._placement()
        self.kv_free = {gpu: _kv_room(cluster, model, s) for gpu, s in self.shards.items()}
        self.load: dict[str, float] = dict.fromkeys(self.shards, 0.0)
        self.busy_ms: dict[str, float] = dict.fromkeys(self.shards, 0.0)
        self.running: set[str] = set()
        self.link_bytes_per_ms = workload.link_mb_s * 1e3
        self.queues: dict[str, deque[tuple[_Group, int]]] = {gpu: deque() for gpu in self.shards}
        self.chains: dict[tuple[Stage, ...], _Chain] = {}
        self.events: list[tuple[float, int, Callable[[float], None]]] = []
        self.counter = 0
        self.route = self._router()
        prompts, outputs = workload.lengths()
        self.waiting = deque(_Request(int(p), int(o)) for p, o in zip(prompts, outputs, strict=True))
        self.done: list[_Request] = []
        self.produced: list[tuple[float, int]] = [(0.0, 0)]  # (time, tokens generated so far)
        self.now = 0.0

    def _placement(self) -> dict[str, Stage]:
        """The layers each GPU holds (for Petals, its whole span)."""
        spans = self.plan.notes.get("spans")
        if self.plan.routing == "petals" and spans:
            return {gpu: Stage(gpu, a, b) for gpu, (a, b) in spans.items()}
        return {s.gpu: s for s in self.plan.shards()}

    def _router(self) -> Callable[[_Request, set[str]], tuple[Stage, ...] | None]:
        """route(request, GPUs to avoid) -> the stages it runs on, None when no chain has room."""
        kv_token = self.model.kv_bytes_per_token_layer

        def blocked(request: _Request, avoid: set[str]) -> set[str]:
            need = (request.prompt + request.output) * kv_token
            return avoid | {gpu for gpu, s in self.shards.items() if self.kv_free[gpu] < need * s.layers}

        if self.plan.routing == "round-robin":
            rotation = RoundRobin(self.plan.pipelines)

            def fixed(request: _Request, avoid: set[str]) -> tuple[Stage, ...] | None:
                full = blocked(request, avoid)
                for _ in self.plan.pipelines:
                    stages = rotation.next_chain().stages
                    if not full & {s.gpu for s in stages}:
                        return stages
                return None

            return fixed
        if self.plan.routing == "petals":
            spans = SpanGraph(list(self.shards.values()), self.cluster, self.step_ms, self.model.num_layers)
            cached: list[tuple[float, tuple[Stage, ...]]] = []

            def spanned(request: _Request, avoid: set[str]) -> tuple[Stage, ...] | None:
                """Petals clients route on the server loads announced to the DHT, refreshed every
                PETALS_REFRESH_MS; a fresh route is computed when that view is stale or the route is full."""
                full = blocked(request, avoid)
                fresh = cached and self.now - cached[0][0] < PETALS_REFRESH_MS
                if fresh and not full & {s.gpu for s in cached[0][1]}:
                    return cached[0][1]
                chain = spans.cheapest_chain(self.load, full)
                cached[:] = [(self.now, chain.stages)] if chain else []
                return chain.stages if chain else None

            return spanned
        graph = ShardGraph(list(self.shards.values()), self.cluster, self.step_ms, self.model.num_layers)

        def dag(request: _Request, avoid: set[str]) -> tuple[Stage, ...] | None:
            chain = graph.cheapest_chain(self.load, blocked=blocked(request, avoid))
            return chain.stages if chain else None

        return dag

    def _chain(self, stages: tuple[Stage, ...]) -> _Chain:
        chain = self.chains.get(stages)
        if chain is None:
            gpus = [s.gpu for s in stages]
            ring = zip(gpus, [*gpus[1:], gpus[0]], strict=True)
            hops = tuple(self.cluster.one_way_ms(a, b) for a, b in ring)
            stage_ms = [s.layers * self.step_ms[s.gpu] for s in stages]
            chain = self.chains[stages] = _Chain(stages, hops)
            count = min(MAX_MICROBATCHES, microbatches(stage_ms, list(hops)))
            chain.groups = [_Group(chain) for _ in range(count)]
        return chain

    def _at(self, time: float, action: Callable[[float], None]) -> None:
        self.counter += 1
        heapq.heappush(self.events, (time, self.counter, action))

    def _admit(self) -> None:
        """Routes waiting requests, first come first served, until one finds no room (a chain whose
        microbatches are all full is avoided and the request routed again)."""
        while self.waiting:
            request = self.waiting[0]
            avoid: set[str] = set()
            while (stages := self.route(request, avoid)) is not None:
                chain = self._chain(stages)
                group = min(chain.groups, key=lambda g: g.size)
                if group.size < MAX_BATCH:
                    break
                avoid |= {s.gpu for s in stages}
            if stages is None:
                return
            self.waiting.popleft()
            request.admitted, request.chain = self.now, chain
            for stage in stages:
                self.kv_free[stage.gpu] -= self._kv(request, stage)
                self.load[stage.gpu] += 1
            group.joining.append(request)
            if not group.running:
                self._begin_step(group, self.now)

    def _kv(self, request: _Request, stage: Stage) -> float:
        return (request.prompt + request.output) * self.model.kv_bytes_per_token_layer * stage.layers

    def _begin_step(self, group: _Group, now: float) -> None:
        group.active.extend(group.joining)
        joining, group.joining = group.joining, []
        if not group.active:
            group.running = False
            return
        group.running = True
        decode = [r for r in group.active if r not in joining]
        context = float(sum(r.prompt + r.generated for r in decode))
        prompts = [r.prompt for r in joining]
        group.step = (
            float(len(decode) + sum(prompts)),
            context,
            context + sum(p * (p + 1) / 2 for p in prompts),
        )
        self._arrive(group, 0, now)

    def _arrive(self, group: _Group, index: int, now: float) -> None:
        gpu = group.chain.stages[index].gpu
        self.queues[gpu].append((group, index))
        if gpu not in self.running:
            self._run(gpu, now)

    def _run(self, gpu: str, now: float) -> None:
        """Runs every job waiting at `gpu` as one batch (continuous batching across microbatches and chains:
        the weights are read once for all of them)."""
        jobs = list(self.queues[gpu])
        self.queues[gpu].clear()
        tokens = sum(group.step[0] for group, _ in jobs)
        cached = sum(group.step[1] for group, _ in jobs)
        pairs = sum(group.step[2] for group, _ in jobs)
        layers = max(group.chain.stages[index].layers for group, index in jobs)
        duration = layers * layer_ms(self.cluster.gpu(gpu), self.model, tokens, cached, pairs)
        self.running.add(gpu)
        self.busy_ms[gpu] += duration
        self._at(now + duration, lambda t: self._finished(gpu, jobs, t))

    def _finished(self, gpu: str, jobs: list[tuple[_Group, int]], now: float) -> None:
        self.running.discard(gpu)
        if self.queues[gpu]:
            self._run(gpu, now)
        for group, index in jobs:
            chain = group.chain
            if index + 1 < len(chain.stages):
                link = chain.hops_ms[index]
                transfer = group.step[0] * self.model.activation_bytes_per_token / self.link_bytes_per_ms
                self._at(now + link + (transfer if link > 0 else 0.0), self._next_stage(group, index + 1))
            else:
                self._at(now + chain.hops_ms[index], partial(self._end_step, group))

    def _next_stage(self, group: _Group, index: int) -> Callable[[float], None]:
        return lambda t: self._arrive(group, index, t)

    def _end_step(self, group: _Group, now: float) -> None:
        self.now = now
        done_before = len(self.done)
        still: list[_Request] = []
        for request in group.active:
            request.generated += 1
            if request.generated == 1:
                request.first_token = now
            if request.generated >= request.output:
                self._release(request, now)
            else:
                still.append(request)
        group.active = still
        self.produced.append((now, self.produced[-1][1] + len(group.active) + len(self.done) - done_before))
        self._admit()
        self._begin_step(group, now)

    def _release(self, request: _Request, now: float) -> None:
        assert request.chain is not None
        for stage in request.chain.stages:
            self.kv_free[stage.gpu] += self._kv(request, stage)
            self.load[stage.gpu] -= 1
        request.finished = now
        self.done.append(request)

    def run(self) -> SimResult:
        self._admit()
        while self.events:
            time, _, action = heapq.heappop(self.events)
            action(time)
        done = self.done
        makespan_ms = max((r.finished for r in done), default=0.0)
        tokens = sum(r.output for r in done)
        latencies = [(r.finished - r.admitted) / 1e3 for r in done] or [0.0]
        tpot = [(r.finished - r.first_token) / (r.output - 1) for r in done if r.output > 1]
        span = makespan_ms if makespan_ms > 0 else math.inf
        return SimResult(
            requests=self.workload.requests,
            completed=len(done),
            output_tokens=tokens,
            makespan_s=makespan_ms / 1e3,
            throughput_tokens_s=self._steady_rate(),
            latency_p50_s=float(np.percentile(latencies, 50)),
            latency_p99_s=float(np.percentile(latencies, 99)),
            tpot_ms_mean=float(np.mean(tpot)) if tpot else 0.0,
            gpu_utilization=sum(self.busy_ms.values()) / len(self.cluster.gpus) / span,
            serving_gpu_utilization=sum(self.busy_ms.values()) / max(1, len(self.shards)) / span,
            chains=len(self.chains),
        )

    def _steady_rate(self) -> float:
        """Tokens per second while the first 10% to 80% of all output tokens are generated: the steady
        state, leaving out the ramp-up and the drain of the last long requests."""
        times = np.array([t for t, _ in self.produced])
        counts = np.array([c for _, c in self.produced], dtype=float)
        if counts[-1] == 0:
            return 0.0
        low, high = np.interp([0.1 * counts[-1], 0.8 * counts[-1]], counts, times)
        return float(0.7 * counts[-1] / ((high - low) / 1e3)) if high > low else 0.0


def _kv_room(cluster: Cluster, model: ModelSpec, stage: Stage) -> float:
    """Bytes left for KV cache on a GPU once its weights and the runtime share are in."""
    memory = cluster.gpu(stage.gpu).memory_bytes
    return memory * (1 - RUNTIME_FRACTION) - shard_units(stage, model) * model.layer_bytes


def simulate(plan: Plan, cluster: Cluster, model: ModelSpec, workload: Workload | None = None) -> SimResult:
    """Serves `workload` (default: 2,000 DeServe-like requests) under `plan`; deterministic per seed."""
    return _Simulation(plan, cluster, model, workload or Workload()).run()
