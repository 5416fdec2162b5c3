"""The clusters and model the scheduling benchmarks (and the CLI schema test) run on.

Heterogeneous clusters mix the GPU types of ../shared/ANCHORS.md (A100-80GB, A100-40GB, RTX 5090,
RTX 4090) and spread them over AWS regions; the model has Qwen3-32B's shape (64 layers, bf16). The Parallax
testbed is the paper's 5x RTX 5090 + 2x RTX 4090, each machine on its own site, 10 ms apart one way.
"""

from __future__ import annotations

import random
from typing import Any

ANCHOR_TYPES = ("A100-80GB", "A100-40GB", "RTX5090", "RTX4090")
REGIONS = (
    "us-east-1",
    "us-west-2",
    "eu-west-1",
    "eu-central-1",
    "ap-northeast-1",
    "ap-southeast-1",
    "sa-east-1",
    "ap-south-1",
)

# Qwen3-32B's config.json, the fields the planner reads.
QWEN3_32B: dict[str, Any] = {
    "architectures": ["Qwen3ForCausalLM"],
    "model_type": "qwen3",
    "hidden_size": 5120,
    "intermediate_size": 25600,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "num_hidden_layers": 64,
    "vocab_size": 151936,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}


def heterogeneous(n: int, regions: int, seed: int = 0) -> dict[str, Any]:
    """n GPUs of the anchor types, each in one of the first `regions` regions, drawn from `seed`."""
    rnd = random.Random(f"{n}/{regions}/{seed}")
    gpus = [
        {"id": f"gpu-{i:03d}", "type": rnd.choice(ANCHOR_TYPES), "region": REGIONS[rnd.randrange(regions)]}
        for i in range(n)
    ]
    return {"gpus": gpus}


def parallax_testbed() -> dict[str, Any]:
    """Parallax's testbed: 5x RTX 5090 + 2x RTX 4090, about 10 ms apart (one way)."""
    types = ["RTX5090"] * 5 + ["RTX4090"] * 2
    sites = [f"site-{i}" for i in range(len(types))]
    rtt = {a: {b: (1.0 if a == b else 20.0) for b in sites} for a in sites}
    gpus = [{"id": f"{t.lower()}-{i}", "type": t, "region": sites[i]} for i, t in enumerate(types)]
    return {"gpus": gpus, "rtt_ms": rtt}


def quality_clusters() -> dict[str, dict[str, Any]]:
    """The clusters of the allocation-quality benchmark, by name."""
    return {
        "parallax testbed (7)": parallax_testbed(),
        "16 GPUs / 4 regions": heterogeneous(16, 4),
        "64 GPUs / 6 regions": heterogeneous(64, 6),
        "256 GPUs / 8 regions": heterogeneous(256, 8),
    }
