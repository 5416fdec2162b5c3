"""What a pipeline stage holds in memory: its configured budget (weights + KV page pools) and a measured peak.

The budget is counted from the tensors themselves. The peak is measured from outside torch: on CUDA, the
allocator's high-water mark; on CPU, the process's peak resident set (Linux VmHWM, reset through
/proc/self/clear_refs when the measurement starts) less its file-backed pages, i.e. anonymous memory: tensors,
the allocator's slack, Python objects, but not shared-library code that torch pages in the first time a kernel
runs. That subtraction is exact only if no file-backed page arrives during the measurement, so the measurement
reports how many did (measure a warmed-up run and it is zero).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch

from miner.kv.offload import MicrobatchKVCache
from miner.model.shard import StageShard

STATUS = Path("/proc/self/status")
CLEAR_REFS = Path("/proc/self/clear_refs")


@dataclass(frozen=True)
class StageBudget:
    weight_bytes: int
    kv_device_bytes: int  # local pools of every microbatch + the two global pools
    kv_host_bytes: int  # host buffers that offloaded pages are swapped to

    def resident_on(self, device: torch.device) -> int:
        """Bytes of the budget that live in `device`'s memory (on CPU the host buffers do too)."""
        host = self.kv_host_bytes if device.type == "cpu" else 0
        return self.weight_bytes + self.kv_device_bytes + host


def stage_budget(shard: StageShard, cache: MicrobatchKVCache) -> StageBudget:
    pools = cache.device_cache
    return StageBudget(
        weight_bytes=shard.weight_bytes,
        kv_device_bytes=pools.keys.nbytes + pools.values.nbytes,
        kv_host_bytes=sum(buffer.nbytes for buffer in cache.host),
    )


def status_bytes(field: str) -> int:
    """A size field of /proc/self/status (VmRSS, VmHWM, RssAnon, RssFile, RssShmem), in bytes."""
    match = re.search(rf"^{field}:\s+(\d+) kB", STATUS.read_text(), re.MULTILINE)
    if match is None:
        raise RuntimeError(f"no {field} in {STATUS}")
    return int(match.group(1)) * 1024


def memory_in_use(device: torch.device) -> int:
    """Bytes in use now: the CUDA allocator's on a GPU, the process's anonymous resident memory on CPU."""
    if device.type == "cuda":
        return torch.cuda.memory_allocated(device)
    return status_bytes("VmRSS") - status_bytes("RssFile")


@dataclass
class PeakMeasurement:
    peak_bytes: int = 0  # the peak of memory_in_use, filled in when the measured block ends
    file_pages_paged_in: int = 0  # CPU: bytes of files (library code) first touched during the block


@contextmanager
def peak_memory(device: torch.device) -> Iterator[PeakMeasurement]:
    """The peak of `memory_in_use` while the block runs (on CPU, Linux only). Subtract `memory_in_use` from
    before the stage was loaded to get the stage's own peak."""
    measurement = PeakMeasurement()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        yield measurement
        torch.cuda.synchronize(device)
        measurement.peak_bytes = torch.cuda.max_memory_allocated(device)
        return
    files_before = status_bytes("RssFile")
    CLEAR_REFS.write_text("5")  # "5" resets VmHWM to the current resident set
    yield measurement
    files_after = status_bytes("RssFile")
    measurement.file_pages_paged_in = files_after - files_before
    measurement.peak_bytes = status_bytes("VmHWM") - files_after
