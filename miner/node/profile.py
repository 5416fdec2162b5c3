"""What a node tells the coordinator about its device: memory it lends, measured per-layer decode latency,
and measured compute and memory throughput (the planner's inputs)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import torch

from client_sdk.device import DeviceProfile
from miner.model.config import ModelConfig
from miner.pipeline.plan import decode_step_ms


def device_memory_gb(device: str) -> float:
    if device.startswith("cuda"):
        return torch.cuda.get_device_properties(torch.device(device)).total_memory / 2**30
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30


def device_name(device: str) -> str:
    return torch.cuda.get_device_name(torch.device(device)) if device.startswith("cuda") else "cpu"


def _best_seconds(run: Any, repeats: int = 3) -> float:
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - started)
    return best


@torch.inference_mode()
def measure_tflops(device: str, n: int = 512) -> float:
    a = torch.randn(n, n, device=device)
    b = torch.randn(n, n, device=device)
    return 2 * n**3 / _best_seconds(lambda: a @ b) / 1e12


@torch.inference_mode()
def measure_bandwidth_gb_s(device: str, mib: int = 64) -> float:
    source = torch.empty(mib * 2**18, device=device)  # float32: 4 bytes each
    target = torch.empty_like(source)
    return 2 * source.numel() * 4 / _best_seconds(lambda: target.copy_(source)) / 1e9  # read + write


def profile(
    model_dir: Path, dtype: torch.dtype, device: str, memory_gb: float | None = None
) -> DeviceProfile:
    """Measures this device on the model it will serve (a decode step of all layers at batch 1)."""
    layers = ModelConfig.load(model_dir).num_layers
    step = decode_step_ms(model_dir, 0, layers, 1, 16, dtype, device)
    return DeviceProfile(
        gpu=device_name(device)[:64],
        memory_gb=memory_gb if memory_gb is not None else device_memory_gb(device),
        tflops=measure_tflops(device),
        mem_bandwidth_gb_s=measure_bandwidth_gb_s(device),
        layer_latency_ms=max(step / layers, 1e-3),
    )
