"""How long one decoder layer takes on a GPU: a roofline on the datasheet figures, scaled to a measurement.

Decode reads every weight once per step and the cached keys and values of every sequence, so at small
batches it is bound by memory bandwidth (at about 75% of the datasheet figure, which matches Ren 2024's
Table 2 within about 15%); large batches and prefill become bound by compute. A GPU with a measured
`layer_latency_ms` (batch 1) keeps the roofline's shape, scaled so batch 1 matches the measurement.
"""

from __future__ import annotations

from collections.abc import Iterable

from coordinator.scheduling.cluster import Gpu
from coordinator.scheduling.model import ModelSpec

MEMORY_EFFICIENCY = 0.75
COMPUTE_EFFICIENCY = 0.5
REFERENCE_BATCH = 16


def _roofline_ms(gpu: Gpu, model: ModelSpec, tokens: float, kv_read: float, attention_pairs: float) -> float:
    moved = model.layer_bytes + kv_read * model.kv_bytes_per_token_layer
    flops = 2.0 * model.active_layer_params * tokens + 4.0 * model.heads * model.head_dim * attention_pairs
    memory_s = moved / (gpu.mem_bandwidth_gb_s * 1e9 * MEMORY_EFFICIENCY)
    compute_s = flops / (gpu.tflops * 1e12 * COMPUTE_EFFICIENCY)
    return 1e3 * max(memory_s, compute_s)


def layer_ms(
    gpu: Gpu,
    model: ModelSpec,
    tokens: float = 1.0,
    kv_read: float = 0.0,
    attention_pairs: float | None = None,
) -> float:
    """Milliseconds for one layer to process `tokens` new tokens that read `kv_read` cached tokens.

    `attention_pairs` (query-key pairs scored) defaults to `kv_read`, which is right for decode; prefill of
    p tokens scores about p^2/2 pairs and reads nothing from the cache.
    """
    pairs = kv_read if attention_pairs is None else attention_pairs
    estimate = _roofline_ms(gpu, model, tokens, kv_read, pairs)
    if gpu.layer_latency_ms is None:
        return estimate
    return estimate * gpu.layer_latency_ms / _roofline_ms(gpu, model, 1.0, 0.0, 0.0)


def reference_layer_ms(gpu: Gpu, model: ModelSpec, batch: int = REFERENCE_BATCH) -> float:
    """Per-layer decode step time at a typical offline batch (contexts of 256 tokens): the speed used to
    balance layers inside a pipeline and to price a stage in routing."""
    return layer_ms(gpu, model, batch, batch * 256.0)


def step_times(gpus: Iterable[Gpu], model: ModelSpec) -> dict[str, float]:
    """`reference_layer_ms` of every GPU by id, computed once per distinct set of speed figures (a large
    cluster has a handful of GPU types)."""
    by_figures: dict[tuple[float, float, float | None], float] = {}
    out: dict[str, float] = {}
    for gpu in gpus:
        key = (gpu.tflops, gpu.mem_bandwidth_gb_s, gpu.layer_latency_ms)
        ms = by_figures.get(key)
        if ms is None:
            ms = by_figures[key] = reference_layer_ms(gpu, model)
        out[gpu.id] = ms
    return out
