"""Cluster and model descriptions: defaults from the packaged data, one-line errors naming the field."""

from __future__ import annotations

from typing import Any

import pytest

from bench._clusters import QWEN3_32B
from coordinator.scheduling.cluster import GIB, Cluster
from coordinator.scheduling.data import default_rtt_ms, gpu_type_figures
from coordinator.scheduling.errors import SchedulingError
from coordinator.scheduling.model import ModelSpec


def gpu(**fields: Any) -> dict[str, Any]:
    return {"id": "g0", "type": "RTX4090", "region": "us-east-1", **fields}


def test_known_type_and_default_rtt_fill_the_gaps() -> None:
    cluster = Cluster.from_dict({"gpus": [gpu(), gpu(id="g1", region="eu-west-1", memory_fraction=0.5)]})
    first, second = cluster.gpus
    assert (first.vram_gb, first.mem_bandwidth_gb_s) == (24, 1008)  # paper_figures.json
    assert second.memory_bytes == pytest.approx(12 * GIB)
    assert cluster.rtt("us-east-1", "eu-west-1") == default_rtt_ms()["us-east-1"]["eu-west-1"]
    assert cluster.one_way_ms("g0", "g1") == pytest.approx(cluster.rtt("us-east-1", "eu-west-1") / 2)
    assert cluster.one_way_ms("g0", "g0") == 0.0
    assert set(gpu_type_figures()) >= {"A100-80GB", "A100-40GB", "A10G", "RTX3090", "RTX4090", "RTX5090"}


def test_custom_figures_and_rtt() -> None:
    raw = {
        "gpus": [gpu(type="MI300X", vram_gb=192, tflops=1300, mem_bandwidth_gb_s=5300, region="lab")],
        "rtt_ms": {"lab": {"lab": 0.2}},
    }
    cluster = Cluster.from_dict(raw)
    assert cluster.gpus[0].vram_gb == 192
    assert Cluster.from_dict(cluster.to_dict()) == cluster


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ([], 'cluster: expected a JSON object with a "gpus" list'),
        ({"gpus": []}, "gpus: the cluster has no GPUs"),
        ({"gpus": [gpu()], "nodes": 1}, "cluster: unknown field 'nodes'"),
        ({"gpus": [gpu(type="TPUv9")]}, "gpus[0].type: unknown GPU type 'TPUv9' and no vram_gb given"),
        (
            {"gpus": [gpu(type="X", vram_gb=8, tflops=1)]},
            "gpus[0].type: unknown GPU type 'X' and no mem_bandwidth",
        ),
        ({"gpus": [gpu(vram_gb=-8)]}, "gpus[0].vram_gb: must be positive, got -8"),
        ({"gpus": [gpu(vram_gb="big")]}, "gpus[0].vram_gb: expected a number, got 'big'"),
        ({"gpus": [gpu(memory_fraction=1.5)]}, "gpus[0].memory_fraction: must be in (0, 1], got 1.5"),
        ({"gpus": [gpu(), gpu()]}, "gpus[1].id: duplicate id 'g0'"),
        ({"gpus": [gpu(region="mars-1")]}, "gpus[0].region: 'mars-1' is not a region of rtt_ms"),
        ({"gpus": [gpu(id="")]}, "gpus[0].id: expected a non-empty string"),
        ({"gpus": [gpu(vram=24)]}, "gpus[0]: unknown field 'vram'"),
        ({"gpus": [gpu(region="a")], "rtt_ms": {"a": {"a": -1}}}, "rtt_ms.a.a: must not be negative"),
        (
            {"gpus": [gpu(region="a"), gpu(id="g1", region="b")], "rtt_ms": {"a": {}, "b": {}}},
            "rtt_ms: no latency",
        ),
    ],
)
def test_bad_clusters_fail_on_one_line_naming_the_field(raw: Any, message: str) -> None:
    with pytest.raises(SchedulingError) as err:
        Cluster.from_dict(raw)
    assert str(err.value).startswith(message)
    assert "\n" not in str(err.value)


def test_qwen3_32b_shape() -> None:
    model = ModelSpec.from_hf_config(QWEN3_32B)
    # attention 5120 * 128 * (2*64 + 2*8) + MLP 3 * 5120 * 25600 + two norms
    assert model.layer_params == 5120 * 128 * 144 + 3 * 5120 * 25600 + 2 * 5120
    assert model.layer_bytes == 2 * model.layer_params
    assert model.kv_bytes_per_token == 2 * 8 * 128 * 2 * 64  # keys and values, 8 KV heads, bf16, 64 layers
    assert model.embedding_bytes == model.head_bytes == 151936 * 5120 * 2
    assert model.embedding_units == model.head_units == 2  # 1.56 GB over 0.98 GB layers, rounded up
    assert model.units_needed == 68
    # An RTX 4090 keeps 30% for KV cache and runtime: 24 GiB * 0.7 / 0.975 GB
    assert model.capacity_units(24 * GIB) == 18
    assert model.capacity_units(24 * GIB, kv_reserve=0.0) == 26
    assert ModelSpec.from_hf_config(QWEN3_32B, dtype="fp8").layer_bytes == model.layer_params


def test_mixture_of_experts_counts_every_expert_but_computes_with_the_routed_ones() -> None:
    moe = ModelSpec.from_hf_config(
        {**QWEN3_32B, "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 1024}
    )
    assert moe.layer_params > moe.active_layer_params
    assert moe.intermediate == 1024


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"hidden_size": None}, "model.hidden_size: missing"),
        ({"num_hidden_layers": 0}, "model.num_hidden_layers: must be at least 1, got 0"),
        ({"num_attention_heads": "64"}, "model.num_attention_heads: expected a whole number"),
        ({"torch_dtype": "float64"}, "model.torch_dtype: unsupported dtype 'float64'"),
    ],
)
def test_bad_model_configs(change: dict[str, Any], message: str) -> None:
    config = {k: v for k, v in {**QWEN3_32B, **change}.items() if v is not None}
    with pytest.raises(SchedulingError, match=message.replace("(", r"\(")):
        ModelSpec.from_hf_config(config)
