"""The single-request TPOT problem of Ren 2024: which machines, in which cyclic order, hold which layers.

A schedule is a cycle of distinct machines; stage i holds a contiguous run of layers and the last stage
returns the sampled token to the first. Its time per output token is the compute of every stage (layers held
times the machine's per-layer latency) plus the one-way latency of every link around the cycle (none for a
single machine). Every stage holds at least one layer: a machine that only relays the token is never part of a
plan.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt


class InfeasibleError(ValueError):
    """The machines cannot hold one copy of the model (or the problem is malformed)."""


@dataclass(frozen=True)
class LatencyMachine:
    """One GPU: where it is, how fast one layer runs on it, and how many layers fit in its memory."""

    id: str
    region: str
    layer_ms: float
    capacity: int


@dataclass(frozen=True, eq=False)
class LatencyProblem:
    """Machines, the one-way latency between every ordered pair of them (ms) and the model's layer count.

    `link_ms[i, j]` is the latency of sending the activations from machine i to machine j; the diagonal is
    unused. Build it from a region round-trip matrix with `from_regions`, or pass a per-machine matrix (the
    benchmarks add noise per pair of machines).
    """

    machines: tuple[LatencyMachine, ...]
    link_ms: npt.NDArray[np.float64]
    num_layers: int

    def __post_init__(self) -> None:
        n = len(self.machines)
        if self.num_layers < 1:
            raise InfeasibleError(f"num_layers must be at least 1, got {self.num_layers}")
        if n == 0:
            raise InfeasibleError("machines: at least one machine is needed")
        ids = [m.id for m in self.machines]
        if len(set(ids)) != n:
            raise InfeasibleError("machines: ids must be unique")
        for m in self.machines:
            if not (math.isfinite(m.layer_ms) and m.layer_ms > 0):
                raise InfeasibleError(f"machine {m.id}: layer_ms must be positive, got {m.layer_ms}")
            if m.capacity < 0:
                raise InfeasibleError(f"machine {m.id}: capacity must not be negative, got {m.capacity}")
        link = np.asarray(self.link_ms, dtype=np.float64)
        if link.shape != (n, n):
            raise InfeasibleError(f"link_ms must be {n}x{n}, got shape {link.shape}")
        if not np.all(np.isfinite(link)) or np.any(link < 0):
            raise InfeasibleError("link_ms: latencies must be finite and non-negative")
        link = link.copy()
        link.setflags(write=False)
        object.__setattr__(self, "link_ms", link)

    @classmethod
    def from_regions(
        cls,
        machines: Sequence[LatencyMachine],
        rtt_ms: Mapping[str, Mapping[str, float]],
        num_layers: int,
    ) -> LatencyProblem:
        """One-way latency = half the round trip between the machines' regions (in-region: the diagonal)."""
        missing = sorted({m.region for m in machines} - set(rtt_ms))
        if missing:
            raise InfeasibleError(f"rtt_ms: no row for region {missing[0]}")
        try:
            link = [[rtt_ms[a.region][b.region] / 2.0 for b in machines] for a in machines]
        except KeyError as err:
            raise InfeasibleError(f"rtt_ms: no entry for region {err.args[0]}") from None
        return cls(tuple(machines), np.array(link, dtype=np.float64), num_layers)

    @property
    def layer_ms(self) -> npt.NDArray[np.float64]:
        return np.array([m.layer_ms for m in self.machines], dtype=np.float64)

    @property
    def capacity(self) -> npt.NDArray[np.int64]:
        return np.array([m.capacity for m in self.machines], dtype=np.int64)

    def check_feasible(self) -> None:
        """Raises InfeasibleError when all memory together cannot hold the model once."""
        total = int(self.capacity.sum())
        if total < self.num_layers:
            raise InfeasibleError(
                f"not enough memory: the machines hold {total} layers in all, the model has {self.num_layers}"
            )
