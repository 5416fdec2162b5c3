"""Scheduler scaling (Parallax Figure 5): Phase 1 and Phase 2 run time for clusters of 4 to 256 GPUs, and
ours alone up to internet scale (Phase 1 to 16,384 GPUs; the shard graph, Phase 2 and batch routing to 4,096).

Clusters mix the GPU types of ../shared/ANCHORS.md (A100-80GB, A100-40GB, RTX 5090, RTX 4090) at random,
either in one region or over 8 AWS regions; the model has Qwen3-32B's shape (64 layers, bf16). Phase 1 is
the whole `allocate` call (stage search, Z(k), water-filling, leftovers); Phase 2 is one chain selection over
the shard DAG with random queue depths, the graph built once beforehand. Each figure is the median CPU time
of repeated runs (see `median_ms`), then the worst of 3 random clusters. Baselines run in the same process:
the per-GPU DP as the paper states it (state: GPU index, sorted residuals of partial pipelines, finished
count; exponential, stopped once one size takes over 10 s), Parallax's shipped variant, Petals-style
placement and its span routing per request.

At internet scale (one cluster over 8 regions per size) the second table adds the coordinator's routing of a
50,000-line batch in units of 32 lines over the plan's pipelines: one unit at a time (`Router.cheapest`,
timed on the first 20 units) against the whole batch in one pass (`Router.assign`), per unit; one GPU
joining and leaving the running plan (`Membership`) beside a full re-plan; and the growth of each phase from
256 to 4,096 GPUs with its fitted exponent (time ~ GPUs^e; linear is 16x, e = 1). Last, the simulated
throughput of our plans against Parallax's shipped scheduler at 1,024 GPUs (allocation_quality's workload).
"""

from __future__ import annotations

import math
import os
import random
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from functools import cache, partial
from pathlib import Path

from rich.table import Table

from bench._clusters import ANCHOR_TYPES, QWEN3_32B, REGIONS
from bench._report import figure, publish, report_table
from bench.allocation_quality import workload_for
from coordinator.scheduling.allocation import allocate, capacities
from coordinator.scheduling.baselines import parallax_shipped, petals
from coordinator.scheduling.cluster import Cluster
from coordinator.scheduling.costs import step_times
from coordinator.scheduling.membership import Membership
from coordinator.scheduling.model import ModelSpec
from coordinator.scheduling.plan import Stage
from coordinator.scheduling.routing import ShardGraph, SpanGraph
from coordinator.scheduling.stages import StageSearch
from coordinator.scheduling.strategies import make_plan
from coordinator.services.routing import Router
from coordinator.simulate.engine import simulate

SIZES = (4, 8, 16, 32, 64, 128, 256)
LARGE_SIZES = (256, 512, 1024, 2048, 4096, 8192, 16384)
ROUTED_UP_TO = 4096  # the shard graph, Phase 2 and batch routing are measured up to this size
SIMULATED_GPUS = 1024
BATCH_LINES, UNIT_LINES, TIMED_ONE_AT_A_TIME = 50_000, 32, 20
SEEDS = 3
PAPER = {"phase1": {4: 0.10, 256: 8.55}, "phase2": {4: 0.0136, 256: 6.6339}}  # paper_figures.json, ms
ANCHORS = {  # ../shared/ANCHORS.md: Parallax's shipped code on a 2-core machine, ms
    "greedy": {8: 0.28, 16: 0.74, 24: 1.34, 32: 1.74, 64: 3.94, 128: 9.80, 256: 26.25},
    "dp": {8: 1.04, 16: 686.0, 24: 30313.0},
    "routing": {8: 0.05, 16: 0.14, 24: 0.28, 32: 0.29, 64: 0.63, 128: 2.93, 256: 10.46},
}
NAIVE_LIMIT_S = 10.0

Row = dict[str, float | None]


def cluster_of(n: int, regions: int, seed: int) -> Cluster:
    rnd = random.Random(f"scaling/{n}/{regions}/{seed}")
    gpus = [
        {"id": f"g{i}", "type": rnd.choice(ANCHOR_TYPES), "region": REGIONS[rnd.randrange(regions)]}
        for i in range(n)
    ]
    return Cluster.from_dict({"gpus": gpus})


def median_ms(action: Callable[[], object], budget_s: float = 0.3, least: int = 5) -> float:
    """Median CPU time of `action` over repeated runs (at least `least`, about `budget_s` in all).

    CPU time of this process, not wall time: the build machine's 2 cores are shared with other jobs, whose
    load would otherwise show up as scheduler time (on an idle machine the two agree for this code)."""
    times: list[float] = []
    started = time.perf_counter()
    while len(times) < least or time.perf_counter() - started < budget_s:
        t = time.process_time()
        action()
        times.append((time.process_time() - t) * 1e3)
        if len(times) >= 2000:
            break
    return statistics.median(times)


def cheapest_under_next(graph: ShardGraph, loads: list[dict[str, float]], turn: Iterator[int]) -> object:
    """One routing query, under the next of `loads` each time it is called."""
    return graph.cheapest_chain(loads[next(turn) % len(loads)])


class Timeout(Exception):
    pass


def naive_stage_counts(caps: list[int], need: int, deadline: float) -> list[int]:
    """s*(k) for every k by the per-GPU DP the paper states (no merging of equal GPUs), memoized per k."""
    caps = [min(c, need) for c in caps]
    suffix = [sum(caps[i:]) for i in range(len(caps) + 1)]
    table = [0]
    for k in range(1, sum(caps) // need + 1):

        @cache
        def dp(i: int, residuals: tuple[int, ...], finished: int, k: int = k) -> float:
            if time.perf_counter() > deadline:
                raise Timeout
            if finished == k and not residuals:
                return 0
            missing = k - finished - len(residuals)
            if i == len(caps) or missing < 0 or suffix[i] < sum(residuals) + max(0, missing) * need:
                return float("inf")
            best = dp(i + 1, residuals, finished)
            for j, r in enumerate(residuals):
                rest = residuals[:j] + residuals[j + 1 :]
                if r <= caps[i]:
                    best = min(best, 1 + dp(i + 1, rest, finished + 1))
                else:
                    best = min(best, 1 + dp(i + 1, tuple(sorted((*rest, r - caps[i]))), finished))
            if missing > 0:
                if caps[i] >= need:
                    best = min(best, 1 + dp(i + 1, residuals, finished + 1))
                else:
                    best = min(best, 1 + dp(i + 1, tuple(sorted((*residuals, need - caps[i]))), finished))
            return best

        value = dp(0, (), 0)
        if value == float("inf"):
            break
        table.append(int(value))
    return table


def measure(model: ModelSpec) -> tuple[dict[int, Row], bool]:
    rows: dict[int, Row] = {}
    naive_alive = True
    all_exact = True
    for n in SIZES:
        row: Row = {}
        for regions, key in ((1, "ours1"), (8, "ours8")):
            phase1, phase2, build, exact = [], [], [], True
            for seed in range(SEEDS):
                cluster = cluster_of(n, regions, seed)
                plan = allocate(cluster, model)
                exact = exact and plan.notes["s_star_exact"]
                phase1.append(median_ms(partial(allocate, cluster, model)))
                step = step_times(cluster.gpus, model)
                shards = list(plan.shards())
                build.append(median_ms(partial(ShardGraph, shards, cluster, step, 64), 0.1))
                graph = ShardGraph(shards, cluster, step, model.num_layers)
                rnd = random.Random(seed)
                loads = [{s.gpu: float(rnd.randrange(64)) for s in shards} for _ in range(64)]
                it = iter(range(10**9))
                phase2.append(median_ms(partial(cheapest_under_next, graph, loads, it)))
            row[f"{key}_p1"], row[f"{key}_p2"], row[f"{key}_build"] = max(phase1), max(phase2), max(build)
            all_exact = all_exact and exact
        cluster = cluster_of(n, 8, 0)
        row["shipped_p1"] = median_ms(partial(parallax_shipped, cluster, model))
        row["petals_p1"] = median_ms(partial(petals, cluster, model), 0.2, 1)
        spans = [Stage(gpu, a, b) for gpu, (a, b) in petals(cluster, model).notes["spans"].items()]
        step = step_times(cluster.gpus, model)
        span_graph = SpanGraph(spans, cluster, step, model.num_layers)
        row["petals_p2"] = median_ms(span_graph.cheapest_chain, 0.2, 3)
        row["naive_p1"] = None
        if naive_alive:
            caps = list(capacities(cluster_of(n, 1, 0), model, 0.3).values())
            started, cpu = time.perf_counter(), time.process_time()
            try:
                naive = naive_stage_counts(caps, model.units_needed, started + NAIVE_LIMIT_S)
                row["naive_p1"] = (time.process_time() - cpu) * 1e3
                assert naive == StageSearch(caps, model.units_needed).table(), "naive DP disagrees"
            except Timeout:
                naive_alive = False
        rows[n] = row
        print(f"  {n} GPUs measured", flush=True)
    return rows, all_exact


def measure_large(model: ModelSpec) -> dict[int, Row]:
    """Ours alone at internet scale (see the module's docstring)."""
    rows: dict[int, Row] = {}
    units = [UNIT_LINES] * (BATCH_LINES // UNIT_LINES)
    for n in LARGE_SIZES:
        cluster = cluster_of(n, 8, 0)
        plan = allocate(cluster, model)
        row: Row = {
            "pipelines": len(plan.pipelines),
            "p1": median_ms(partial(allocate, cluster, model), 0.5, 3),
        }
        if n <= ROUTED_UP_TO:
            step = step_times(cluster.gpus, model)
            shards = list(plan.shards())
            row["build"] = median_ms(partial(ShardGraph, shards, cluster, step, model.num_layers), 0.3, 3)
            graph = ShardGraph(shards, cluster, step, model.num_layers)
            rnd = random.Random(n)
            loads = [{s.gpu: float(rnd.randrange(64)) for s in shards} for _ in range(64)]
            row["p2"] = median_ms(partial(cheapest_under_next, graph, loads, iter(range(10**9))))
            pipelines = {i: p.stages for i, p in enumerate(plan.pipelines)}

            router = partial(Router, pipelines, cluster, step, queued_lines={}, queue_depth={})
            one_by_one = router()
            cpu = time.process_time()
            for lines in units[:TIMED_ONE_AT_A_TIME]:
                one_by_one.move(lines, to=one_by_one.cheapest() or 0)
            row["unit_each"] = (time.process_time() - cpu) * 1e3 / TIMED_ONE_AT_A_TIME
            at_once = router()
            cpu = time.process_time()
            at_once.assign(units)
            row["unit_wave"] = (time.process_time() - cpu) * 1e3 / len(units)
            row["join"], row["leave"], row["replan"] = membership_ms(cluster, model)
        rows[n] = row
        print(f"  {n} GPUs measured (internet scale)", flush=True)
    return rows


def membership_ms(cluster: Cluster, model: ModelSpec, events: int = 7) -> tuple[float, float, float]:
    """Median CPU ms of one GPU joining a running plan, of it leaving again, and of a full re-plan (Phase 1
    on the members, keeping shards in place)."""
    members = Membership(cluster, model)
    joins, leaves = [], []
    for i in range(events):
        newcomer = replace(cluster.gpus[i], id=f"newcomer-{i}")
        cpu = time.process_time()
        members.join(newcomer)
        joins.append((time.process_time() - cpu) * 1e3)
        cpu = time.process_time()
        members.leave(newcomer.id)
        leaves.append((time.process_time() - cpu) * 1e3)
    return statistics.median(joins), statistics.median(leaves), median_ms(members.rebalance, 0.5, 3)


def simulated_at_scale(model: ModelSpec) -> list[str]:
    """Throughput of our plans and routing against Parallax's shipped scheduler at SIMULATED_GPUS GPUs over 8
    regions, in the simulator, on allocation_quality's workload (what the speed above buys)."""
    cluster = cluster_of(SIMULATED_GPUS, 8, 0)
    rates = {}
    for strategy in ("parallax", "parallax-shipped"):
        plan = make_plan(strategy, cluster, model)
        rates[strategy] = simulate(plan, cluster, model, workload_for(SIMULATED_GPUS)).throughput_tokens_s
    return [
        f"Simulated at {SIMULATED_GPUS:,} GPUs over 8 regions ({workload_for(SIMULATED_GPUS).requests:,} "
        f"requests): ours {rates['parallax']:,.0f} tokens/s, Parallax's shipped scheduler "
        f"{rates['parallax-shipped']:,.0f} tokens/s ({rates['parallax'] / rates['parallax-shipped']:.2f}x)"
    ]


def growth(rows: dict[int, Row], key: str) -> tuple[float, float]:
    """How many times a phase's time grew from 256 to 4,096 GPUs, and the fitted exponent e of time ~ GPUs^e
    (least squares on the logarithms of every size measured)."""
    points = [(math.log(n), math.log(v)) for n, r in rows.items() if (v := r.get(key))]
    mean_x = statistics.fmean(x for x, _ in points)
    mean_y = statistics.fmean(y for _, y in points)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in points) / sum((x - mean_x) ** 2 for x, _ in points)
    return (rows[4096][key] or math.nan) / (rows[256][key] or math.nan), slope


LARGE_PHASES = (
    ("p1", "Phase 1"),
    ("build", "shard graph build"),
    ("p2", "Phase 2 per request"),
    ("unit_wave", "batch routing per unit, one pass"),
)


def large_report(rows: dict[int, Row]) -> tuple[Table, list[str]]:
    table = report_table(
        title="Ours at internet scale, CPU ms (median of repeats, one cluster over 8 regions per size)",
        columns=(
            "GPUs",
            "pipelines",
            "Phase 1",
            "shard graph build",
            "Phase 2 / request",
            f"{BATCH_LINES:,}-line batch routed, per unit of {UNIT_LINES}: one at a time",
            "in one pass",
            "one GPU joins",
            "one GPU leaves",
            "full re-plan",
        ),
    )
    for n, r in rows.items():
        keys = ("pipelines", "p1", "build", "p2", "unit_each", "unit_wave", "join", "leave", "replan")
        table.add_row(f"{n:,}", *(f"{r[k]:.0f}" if k == "pipelines" else fmt(r.get(k)) for k in keys))
    lines = []
    for key, name in LARGE_PHASES:
        times, exponent = growth(rows, key)
        verdict = "met" if times <= 32 else "NOT met"
        lines.append(
            f"{name}: {times:.1f}x from 256 to 4,096 GPUs (linear: 16x; target at most 32x: {verdict}), "
            f"fitted exponent {exponent:.2f}"
        )
    last = rows[ROUTED_UP_TO]
    for event in ("join", "leave"):
        share = (last[event] or math.nan) / (last["replan"] or math.nan)
        lines.append(
            f"One GPU {event}s a plan of {ROUTED_UP_TO:,} GPUs in {share:.1%} of a full re-plan "
            f"(target under 10%: {'met' if share < 0.1 else 'NOT met'})"
        )
    p2 = rows[4096]["p2"] or math.nan
    lines.append(
        f"Phase 2 at 4,096 GPUs: {fmt(p2)} ms per request (target at most 1 ms: "
        f"{'met' if p2 <= 1 else 'NOT met'})"
    )
    return table, lines


def fmt(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}" if value >= 0.01 else f"{value:.4f}"


def report(rows: dict[int, Row]) -> Table:
    title = "Scheduler CPU time, ms (median of repeats, worst of 3 clusters), 2-core build machine"
    table = report_table(
        title=title,
        columns=(
            "GPUs",
            "ours P1 1 region",
            "ours P1 8 regions",
            "paper P1",
            "per-GPU DP (ours, same run)",
            "shipped DP (ANCHORS)",
            "shipped greedy (ANCHORS)",
            "shipped variant P1",
            "Petals P1",
            "ours P2 / req",
            "paper P2",
            "shipped routing (ANCHORS)",
            "Petals P2 / req",
        ),
    )
    for n, r in rows.items():
        table.add_row(
            str(n),
            fmt(r["ours1_p1"]),
            fmt(r["ours8_p1"]),
            fmt(PAPER["phase1"].get(n)),
            fmt(r["naive_p1"]) if r["naive_p1"] is not None else f"> {NAIVE_LIMIT_S * 1e3:,.0f}",
            fmt(ANCHORS["dp"].get(n)) if n in ANCHORS["dp"] else ("> 120,000" if n >= 32 else "—"),
            fmt(ANCHORS["greedy"].get(n)),
            fmt(r["shipped_p1"]),
            fmt(r["petals_p1"]),
            fmt(max(r["ours1_p2"] or 0, r["ours8_p2"] or 0)),
            fmt(PAPER["phase2"].get(n)),
            fmt(ANCHORS["routing"].get(n)),
            fmt(r["petals_p2"]),
        )
    return table


def verdicts(rows: dict[int, Row], exact: bool) -> list[str]:
    lines = [f"s*(k) proven minimal on every cluster measured: {exact}"]
    for phase, key in (("Phase 1", "p1"), ("Phase 2", "p2")):
        for n, paper in PAPER[f"phase{key[1]}"].items():
            ours = max(rows[n][f"ours1_{key}"] or 0.0, rows[n][f"ours8_{key}"] or 0.0)
            status = "met" if ours <= paper else "NOT met"
            fifth = "met" if ours <= paper / 5 else "not met"
            lines.append(
                f"{phase} at {n} GPUs: ours {fmt(ours)} ms vs paper {fmt(paper)} ms: {status}; "
                f"a fifth of the paper ({fmt(paper / 5)} ms): {fifth}"
            )
    graph = max(max(r["ours1_build"] or 0.0, r["ours8_build"] or 0.0) for r in rows.values())
    lines.append(f"Building the shard DAG once per plan (not per request) takes at most {fmt(graph)} ms.")
    lines.append(
        "Phase 2 is one vectorized pass over the layer boundaries (arrivals kept per region): its fixed "
        "cost, about 15 us of numpy calls, dominates below about 100 GPUs, where walking every edge took 2 "
        "to 30 us (the paper's 4-GPU point is lost to it); from 128 GPUs up it is faster, and linear."
    )
    return lines


def plot(rows: dict[int, Row], large: dict[int, Row], path: Path) -> None:
    sizes = list(rows)

    def series(ax: object, key: str, label: str, style: str) -> None:
        points = [(n, rows[n][key]) for n in sizes if rows[n][key] is not None]
        ax.plot([p[0] for p in points], [p[1] for p in points], style, label=label)  # type: ignore[attr-defined]

    with figure(path, 1, 3, figsize=(18, 4.5)) as (left, right, far):
        series(left, "ours1_p1", "ours, 1 region", "o-")
        series(left, "ours8_p1", "ours, 8 regions", "s-")
        series(left, "naive_p1", "per-GPU DP as stated (same run)", "x--")
        series(left, "shipped_p1", "Parallax shipped variant (our s*)", "^-")
        for name, style in (("dp", "k:"), ("greedy", "k--")):
            anchor = ANCHORS[name]
            left.plot(list(anchor), list(anchor.values()), style, label=f"shipped {name} (ANCHORS)")
        left.plot(list(PAPER["phase1"]), list(PAPER["phase1"].values()), "r*", markersize=12, label="paper")
        left.set_title("Phase 1 (allocation)")
        series(right, "ours1_p2", "ours, 1 region", "o-")
        series(right, "ours8_p2", "ours, 8 regions", "s-")
        series(right, "petals_p2", "Petals span routing", "^-")
        routing = ANCHORS["routing"]
        right.plot(list(routing), list(routing.values()), "k--", label="shipped DP routing (ANCHORS)")
        right.plot(list(PAPER["phase2"]), list(PAPER["phase2"].values()), "r*", markersize=12, label="paper")
        right.set_title("Phase 2 (chain selection, per request)")
        for (key, name), style in zip(LARGE_PHASES, ("o-", "s-", "^-", "x-"), strict=True):
            points = [(n, r[key]) for n, r in large.items() if r.get(key)]
            far.plot(
                [n for n, _ in points],
                [v for _, v in points],
                style,
                label=f"{name} (e = {growth(large, key)[1]:.2f})",
            )
        far.plot(
            [256, 4096],
            [large[256]["p2"] or 1.0, 16 * (large[256]["p2"] or 1.0)],
            "k:",
            label="linear from 256",
        )
        far.set_title("Ours at internet scale")
        for ax in (left, right, far):
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("GPUs")
            ax.set_ylabel("ms")
            ax.legend(fontsize=7)


def main() -> None:
    sys.setrecursionlimit(10_000)
    model = ModelSpec.from_hf_config(QWEN3_32B, name="Qwen3-32B")
    load_before = os.getloadavg()[0]
    rows, exact = measure(model)
    large = measure_large(model)
    table = report(rows)
    large_table, large_lines = large_report(large)
    lines = verdicts(rows, exact) + large_lines + simulated_at_scale(model)
    load_after = os.getloadavg()[0]
    cores = os.cpu_count()
    load = f"{load_before:.1f} before, {load_after:.1f} after"
    lines.append(f"Machine load (1-minute average, {cores} cores, shared with other jobs): {load}.")
    publish(
        "scheduler_scaling", [table, large_table], width=200, notes=lines, plot=partial(plot, rows, large)
    )


if __name__ == "__main__":
    main()
