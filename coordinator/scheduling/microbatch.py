"""DeServe's microbatch planner: how many microbatches keep every stage busy over slow links, and how much
KV cache (and so how many sequences) each of them gets.

A microbatch spends sum(T_i) computing and sum(hop_i) in flight per decode step (the last stage sends the
token back to the first); the slowest stage must never wait, so N_B = ceil((sum T_i + sum hop_i) / max T_i).
For S equal stages that is ceil(S (T_S + hop) / T_S): 4 stages at hop = T_S/2 need 6. With offloading, two
global pools of M_G = PCIe bandwidth x T_S bytes alternate between device and host, so each microbatch gets
M'_B = (M_KV - 2 M_G) / N_B + M_G bytes of KV cache instead of M_KV / N_B.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from client_sdk.protocol.pipeline import microbatches


@dataclass(frozen=True)
class MicrobatchPlan:
    microbatches: int
    kv_bytes_per_microbatch: float
    batch: int


def kv_per_microbatch(
    kv_bytes: float, n_microbatches: int, pcie_gb_s: float | None, stage_ms: float
) -> float:
    """KV bytes one microbatch may use: M_KV / N_B, or with offloading (M_KV - 2 M_G) / N_B + M_G."""
    if pcie_gb_s is None:
        return kv_bytes / n_microbatches
    swap = pcie_gb_s * 1e9 * stage_ms / 1e3
    if kv_bytes < 2 * swap:
        raise ValueError(f"{kv_bytes:.3g} bytes of KV cache cannot hold two {swap:.3g}-byte swap pools")
    return (kv_bytes - 2 * swap) / n_microbatches + swap


def plan_microbatches(
    stage_ms: Sequence[float],
    hop_ms: Sequence[float],
    kv_bytes: float,
    kv_bytes_per_token: float,
    tokens_per_sequence: float,
    pcie_gb_s: float | None = None,
) -> MicrobatchPlan:
    """Microbatches for a chain and the sequences per microbatch its tightest stage's KV memory allows.

    `kv_bytes` and `kv_bytes_per_token` are those of the tightest stage (for the layers it holds).
    """
    n = microbatches(stage_ms, hop_ms)
    budget = kv_per_microbatch(kv_bytes, n, pcie_gb_s, max(stage_ms))
    return MicrobatchPlan(n, budget, max(0, int(budget // (kv_bytes_per_token * tokens_per_sequence))))
