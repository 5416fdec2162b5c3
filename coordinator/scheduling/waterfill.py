"""Water-filling: split `total` layer units over a pipeline's stages in proportion to speed, within capacity.

x_i = clamp(lambda * F_i, low_i, cap_i) with lambda such that sum x_i = total. The total is a non-decreasing
piecewise-linear function of lambda, so lambda is found by one sweep over its sorted breakpoints and then
solved exactly on the bracketing segment (no iteration count to tune). Hamilton's largest-remainder rounding
then makes the shares whole without breaking a bound.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from itertools import accumulate
from operator import add, gt, lt, mul, neg, sub, truediv


def water_fill(
    caps: Sequence[int], speeds: Sequence[float], total: int, lows: Sequence[int] | None = None
) -> list[int]:
    """Whole shares low_i <= x_i <= cap_i summing to `total`, proportional to `speeds` where bounds allow."""
    n = len(caps)
    lo = list(lows) if lows is not None else [0] * n
    if not (n == len(speeds) == len(lo)) or (n and min(speeds) <= 0):
        raise ValueError("caps, speeds and lows must align and speeds must be positive")
    if sum(lo) > total or sum(caps) < total or any(map(gt, lo, caps)):
        raise ValueError(f"cannot split {total} within bounds {lo} .. {list(caps)}")
    scale = total / sum(speeds)
    shares = [scale * f for f in speeds]
    if any(map(lt, shares, lo)) or any(map(gt, shares, caps)):  # some bound binds: find lambda
        shares = _real_shares(caps, speeds, total, lo)
    return hamilton_round(shares, total, caps)


def _real_shares(caps: Sequence[int], speeds: Sequence[float], total: int, lo: Sequence[int]) -> list[float]:
    """Between two breakpoints the filled total is `fixed + slope * lambda` (fixed: the stages held at a
    bound, slope: the speeds of those still rising); one pass tabulates it at every breakpoint, bisection
    finds the segment holding `total`, and lambda is solved exactly on it."""
    events = sorted(
        [
            *zip(map(truediv, lo, speeds), speeds, map(neg, lo), strict=True),  # starts rising above its low
            *zip(map(truediv, caps, speeds), map(neg, speeds), caps, strict=True),  # stops at its cap
        ]
    )
    if not events:
        return []
    points, slope_steps, fixed_steps = zip(*events, strict=True)
    slopes = list(accumulate(slope_steps, initial=0.0))  # on the segment that ends at each point
    fixed = list(accumulate(fixed_steps, initial=float(sum(lo))))
    filled = list(map(add, fixed, map(mul, slopes, points)))
    # the first breakpoint reaching the total (the last when rounding left sum(caps) just out of reach)
    i = min(bisect.bisect_left(filled, total), len(filled) - 1)
    lam = (total - fixed[i]) / slopes[i] if slopes[i] > 0 else points[i]
    return [min(c, max(a, lam * f)) for c, a, f in zip(caps, lo, speeds, strict=True)]


def hamilton_round(shares: Sequence[float], total: int, caps: Sequence[int]) -> list[int]:
    """Largest-remainder rounding of real shares that sum to `total` (each share at most its cap)."""
    whole = [math.floor(x + 1e-9) for x in shares]
    short = total - sum(whole)
    if short <= 0:
        return whole
    # most negative (largest remainder) first
    largest_remainders = sorted(zip(map(sub, whole, shares), range(len(shares)), strict=True))
    for _, i in largest_remainders[:short]:
        if whole[i] < caps[i]:
            whole[i] += 1
            short -= 1
    if short:  # only float error can leave units over; give them to any room left
        for i in range(len(whole)):
            room = min(short, caps[i] - whole[i])
            if room > 0:
                whole[i] += room
                short -= room
    return whole
