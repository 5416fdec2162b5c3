"""What a plan promises before it runs: latency per token, a throughput estimate, GPUs used and left idle."""

from __future__ import annotations

from typing import Any

from client_sdk.protocol.pipeline import microbatches
from coordinator.scheduling.cluster import Cluster
from coordinator.scheduling.costs import REFERENCE_BATCH, layer_ms, reference_layer_ms
from coordinator.scheduling.model import ModelSpec
from coordinator.scheduling.plan import Pipeline, Plan


def plan_metrics(plan: Plan, cluster: Cluster, model: ModelSpec) -> dict[str, Any]:
    """Estimates from the cost model: `tpot_ms` is one request alone (batch 1) going around each pipeline;
    `decode_tokens_s` assumes REFERENCE_BATCH sequences per microbatch and DeServe's microbatch count, so
    every pipeline runs at the pace of its slowest stage."""
    pipelines = [_pipeline_figures(p, cluster, model) for p in plan.pipelines]
    tpots = [f["tpot_ms"] for f in pipelines] or [0.0]
    return {
        "pipelines": len(plan.pipelines),
        "stages": sum(len(p.stages) for p in plan.pipelines),
        "gpus": len(cluster.gpus),
        "gpus_used": len(plan.gpus),
        "unused_gpus": sorted(g.id for g in cluster.gpus if g.id not in plan.gpus),
        "extra_shards": [s.to_json() for s in plan.extra],
        "routing": plan.routing,
        "tpot_ms": {"min": min(tpots), "mean": sum(tpots) / len(tpots), "max": max(tpots)},
        "decode_tokens_s": round(sum(f["tokens_s"] for f in pipelines), 1),
        "microbatches": [f["microbatches"] for f in pipelines],
        **plan.notes,
    }


def _pipeline_figures(pipeline: Pipeline, cluster: Cluster, model: ModelSpec) -> dict[str, Any]:
    gpus = [cluster.gpu(s.gpu) for s in pipeline.stages]
    ring = list(zip(pipeline.gpus, [*pipeline.gpus[1:], pipeline.gpus[0]], strict=True))
    hops = [cluster.one_way_ms(a, b) for a, b in ring]
    alone = sum(s.layers * layer_ms(g, model) for s, g in zip(pipeline.stages, gpus, strict=True))
    busy = [s.layers * reference_layer_ms(g, model) for s, g in zip(pipeline.stages, gpus, strict=True)]
    return {
        "tpot_ms": round(alone + sum(hops), 3),
        "tokens_s": REFERENCE_BATCH * 1e3 / max(busy),
        "microbatches": microbatches(busy, hops),
    }
