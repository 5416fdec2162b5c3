"""Water-filling: split `total` layer units over a pipeline's stages in proportion to speed, within capacity.

x_i = clamp(lambda * F_i, low_i, cap_i) with lambda such that sum x_i = total. The total is a non-decreasing
piecewise-linear function of lambda, so lambda is found by bisection over its sorted breakpoints and then
solved exactly on the bracketing segment (no iteration count to tune). Hamilton's largest-remainder rounding
then makes the shares whole without breaking a bound.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence


def water_fill(
    caps: Sequence[int], speeds: Sequence[float], total: int, lows: Sequence[int] | None = None
) -> list[int]:
    """Whole shares low_i <= x_i <= cap_i summing to `total`, proportional to `speeds` where bounds allow."""
    n = len(caps)
    lo = list(lows) if lows is not None else [0] * n
    if not (n == len(speeds) == len(lo)) or any(f <= 0 for f in speeds):
        raise ValueError("caps, speeds and lows must align and speeds must be positive")
    if sum(lo) > total or sum(caps) < total or any(a > c for a, c in zip(lo, caps, strict=True)):
        raise ValueError(f"cannot split {total} within bounds {lo} .. {list(caps)}")
    return hamilton_round(_real_shares(caps, speeds, total, lo), total, caps)


def _real_shares(caps: Sequence[int], speeds: Sequence[float], total: int, lo: Sequence[int]) -> list[float]:
    terms = list(zip(caps, lo, speeds, strict=True))

    def filled(lam: float) -> float:
        out = 0.0
        for c, a, f in terms:
            x = lam * f
            out += a if x < a else c if x > c else x
        return out

    points = sorted({0.0, *(a / f for _, a, f in terms), *(c / f for c, _, f in terms)})
    low, high = 0, len(points) - 1  # invariant: filled(points[low]) <= total
    while high - low > 1:
        mid = (low + high) // 2
        if filled(points[mid]) <= total:
            low = mid
        else:
            high = mid
    left, right = points[low], points[high]
    lam = right if filled(right) <= total else left + (right - left) * _fraction(filled, left, right, total)
    return [min(c, max(a, lam * f)) for c, a, f in terms]


def _fraction(filled: Callable[[float], float], left: float, right: float, total: int) -> float:
    """Where `total` falls between filled(left) and filled(right), the function being linear in between."""
    lo, hi = filled(left), filled(right)
    return (total - lo) / (hi - lo) if hi > lo else 0.0


def hamilton_round(shares: Sequence[float], total: int, caps: Sequence[int]) -> list[int]:
    """Largest-remainder rounding of real shares that sum to `total` (each share at most its cap)."""
    whole = [math.floor(x + 1e-9) for x in shares]
    order = sorted(range(len(shares)), key=lambda i: (whole[i] - shares[i], i))
    for i in order[: total - sum(whole)]:
        if whole[i] < caps[i]:
            whole[i] += 1
    for i in range(len(whole)):  # only float error can leave units over; give them to any room left
        while sum(whole) < total and whole[i] < caps[i]:
            whole[i] += 1
    return whole
