"""Timing helpers the benchmarks share."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def best_time(run: Callable[[], T], repeats: int) -> tuple[float, T]:
    """The fastest of `repeats` timed runs after one warm-up run (first calls allocate and warm caches), with
    the last run's result."""
    result = run()
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        result = run()
        best = min(best, time.perf_counter() - started)
    return best, result
