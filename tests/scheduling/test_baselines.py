"""The baselines behave as their authors describe them."""

from __future__ import annotations

import pytest

from bench._clusters import QWEN3_32B, heterogeneous, parallax_testbed
from coordinator.scheduling.baselines import even_split, hypercluster, parallax_shipped, petals
from coordinator.scheduling.cluster import Cluster
from coordinator.scheduling.errors import SchedulingError
from coordinator.scheduling.model import ModelSpec
from coordinator.scheduling.stages import StageSearch

MODEL = ModelSpec.from_hf_config(QWEN3_32B)
QWEN3_06B = ModelSpec.from_hf_config(
    {
        "hidden_size": 1024,
        "intermediate_size": 3072,
        "num_attention_heads": 16,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "num_hidden_layers": 28,
        "vocab_size": 151936,
    }
)


def laptop(gpu_id: str, memory_gb: float) -> dict[str, object]:
    return {
        "id": gpu_id,
        "type": "M2",
        "region": "us-east-1",
        "vram_gb": memory_gb,
        "tflops": 3.6,
        "mem_bandwidth_gb_s": 100,
    }


def test_hypercluster_reproduces_the_papers_example() -> None:
    """28 layers over 16, 8 and 8 GB: 14, 7 and 7 layers, largest first (HyperCluster, section 3.3)."""
    cluster = Cluster.from_dict({"gpus": [laptop("mini", 8), laptop("air", 16), laptop("linux", 8)]})
    (ring,) = hypercluster(cluster, QWEN3_06B).pipelines
    assert [(s.gpu, s.start, s.end) for s in ring.stages] == [
        ("air", 0, 14),
        ("linux", 14, 21),
        ("mini", 21, 28),
    ]


def test_hypercluster_as_written_fails_when_gpus_outnumber_layers() -> None:
    cluster = Cluster.from_dict(heterogeneous(256, 8))
    with pytest.raises(
        SchedulingError, match=r"^hypercluster: Algorithm 1 gives the last GPU .* -\d+ layers"
    ):
        hypercluster(cluster, MODEL)


def test_petals_spans_cover_the_model_and_route_in_parts() -> None:
    cluster = Cluster.from_dict(heterogeneous(16, 4))
    plan = petals(cluster, MODEL)
    plan.validate(cluster, MODEL)
    assert plan.routing == "petals" and set(plan.notes["spans"]) == {g.id for g in cluster.gpus}
    for pipeline in plan.pipelines:  # chains use parts of the spans their GPUs hold
        for stage in pipeline.stages:
            start, end = plan.notes["spans"][stage.gpu]
            assert start <= stage.start < stage.end <= end


def test_even_split_gives_every_stage_the_same_layers() -> None:
    cluster = Cluster.from_dict(heterogeneous(16, 4))
    plan = even_split(cluster, MODEL)
    plan.validate(cluster, MODEL)
    stages = plan.notes["stages_per_pipeline"]
    assert all(len(p.stages) == stages for p in plan.pipelines) and len(plan.pipelines) == 16 // stages
    assert {s.layers for p in plan.pipelines for s in p.stages} <= {64 // stages, 64 // stages + 1}


def test_parallax_shipped_maximizes_k_squared_over_stages() -> None:
    cluster = Cluster.from_dict(parallax_testbed())
    plan = parallax_shipped(cluster, MODEL)
    plan.validate(cluster, MODEL)
    search = StageSearch([MODEL.capacity_units(g.memory_bytes) for g in cluster.gpus], MODEL.units_needed)
    scores = {k: k * k / s for k, s in enumerate(search.table()) if k}
    assert len(plan.pipelines) == max(scores, key=scores.__getitem__) == 2
    assert plan.routing == "round-robin" and not plan.extra
