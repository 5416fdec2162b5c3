"""DeServe's microbatch planner: how many microbatches keep a pipeline busy over slow links, and how much
KV cache each one gets when KV offloading is on.

A microbatch takes one stage time T_S on each of the S stages and one link latency on each of the S hops of
the ring (the last stage sends its tokens back to the first). While it travels, the other microbatches keep
the stages busy, so no stage idles when at least S * (T_S + latency) / T_S are in flight. With offloading,
two global pools of M_G bytes alternate (M_G = what PCIe moves in one stage time), and every microbatch sees
its share of the rest plus one global pool: M'_B = (M_KV - 2 M_G) / N_B + M_G.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class MicrobatchPlan:
    microbatches: int
    kv_bytes_per_microbatch: float
    global_pool_bytes: float
    tokens_per_microbatch: int
    batch_size: int  # sequences per microbatch at the given context length


def microbatches_in_flight(stage_time_ms: float, one_way_latency_ms: float, stages: int) -> int:
    """The fewest microbatches that keep every stage busy: ceil(S * (T_S + latency) / T_S)."""
    if stage_time_ms <= 0 or one_way_latency_ms < 0 or stages < 1:
        raise ValueError("stage time must be positive, latency non-negative, stages at least 1")
    return math.ceil(stages * (stage_time_ms + one_way_latency_ms) / stage_time_ms - 1e-9)


def plan_microbatches(
    stage_time_ms: float,
    one_way_latency_ms: float,
    stages: int,
    kv_budget_bytes: float,
    kv_bytes_per_token: int,
    context_tokens: int,
    pcie_gb_s: float | None = None,
) -> MicrobatchPlan:
    """Microbatch count and per-microbatch KV space; with `pcie_gb_s`, DeServe's offloading is on."""
    if kv_budget_bytes <= 0 or kv_bytes_per_token <= 0 or context_tokens <= 0:
        raise ValueError("KV budget, KV bytes per token and context length must be positive")
    count = microbatches_in_flight(stage_time_ms, one_way_latency_ms, stages)
    if pcie_gb_s is None:
        global_pool = 0.0
        per_microbatch = kv_budget_bytes / count
    else:
        global_pool = min(pcie_gb_s * 1e9 * stage_time_ms / 1e3, kv_budget_bytes / 2)
        per_microbatch = (kv_budget_bytes - 2 * global_pool) / count + global_pool
    tokens = int(per_microbatch // kv_bytes_per_token)
    return MicrobatchPlan(count, per_microbatch, global_pool, tokens, tokens // context_tokens)
