"""s*(k): the fewest GPUs (stages) that form k disjoint pipelines, each holding `need` layer units.

Parallax's Phase 1 states this as a DP over GPUs in non-increasing capacity order with the sorted residuals of
the partial pipelines as state; its shipped version keeps every GPU apart and grows exponentially. Two facts
make an exact search cheap here:

1. GPUs of equal capacity are interchangeable, so a state is a vector of remaining counts per distinct
   capacity, and a pipeline is a *pattern* of counts.
2. Some optimal solution uses exactly the largest s*(k) GPUs (swapping an unused larger GPU for a used smaller
   one keeps every pipeline full), every pipeline in it is minimal (dropping its smallest GPU breaks it), and
   ordering the pipelines by their largest GPU, each one contains the largest GPU still unused.

So the search adds one pipeline per level, always one containing the largest remaining capacity, and keeps
only Pareto-optimal states: state A is at least as good as B when, for every capacity threshold, A has at
least as many GPUs left at or above it (A could play B's remaining game with GPUs no smaller). On realistic
clusters the frontier holds a handful of states, so the whole table s*(1..k_max) costs well under a
millisecond. When the frontier outgrows `width`, the levels past that point keep only the best states and
are upper bounds; `exact(k)` then proves or improves them with the LP relaxation of the pattern formulation
(scipy's HiGHS) as a bound in a pruned search.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate
from operator import attrgetter, ge, le, mul, sub
from typing import NamedTuple

import numpy as np

DEFAULT_WIDTH = 16
PATTERN_LIMIT = 4096
STATE_LIMIT = 200_000

Counts = tuple[int, ...]
# Generated patterns by (need, capacities from the lead class on, usable counts from it on), with a flag for a
# list cut at PATTERN_LIMIT; shared by the searches of one planning call.
PatternCache = dict[tuple[int, tuple[int, ...], Counts], tuple[tuple[tuple[Counts, int], ...], bool]]
# A path is a linked list of patterns: (previous path, pattern), () for none.
Path = tuple[object, ...]


@dataclass(frozen=True)
class StagePlan:
    """k pipelines as patterns (GPUs per distinct capacity), their total stages, and whether it is proven
    minimal."""

    stages: int
    patterns: tuple[Counts, ...]
    exact: bool


class _State(NamedTuple):
    """GPUs used so far, GPUs left per class, and the patterns chosen (a linked list)."""

    used: int
    rem: Counts
    path: Path


_USED = attrgetter("used")
_REM = attrgetter("rem")


class StageSearch:
    """Exact minimal-stage pipeline formation over integer capacities (GPUs of equal capacity merged)."""

    def __init__(
        self,
        capacities: Sequence[int],
        need: int,
        width: int = DEFAULT_WIDTH,
        shared: PatternCache | None = None,
    ) -> None:
        """`shared` lets searches over several groups of the same cluster reuse generated patterns."""
        if need < 1:
            raise ValueError("need must be at least 1")
        clipped = [min(c, need) for c in capacities if c > 0]
        self.need = need
        self.sizes: tuple[int, ...] = tuple(sorted(set(clipped), reverse=True))
        self.counts: Counts = tuple(map(clipped.count, self.sizes))
        self._thresholds = tuple([-(-need // size) for size in self.sizes])  # most of a class a pipeline uses
        self._usable: Counts = tuple(map(min, self.counts, self._thresholds))  # what patterns can draw on
        self._patterns: dict[tuple[int, Counts], list[tuple[Counts, int]]] = {}
        self._whole: dict[int, list[tuple[Counts, int]] | None] = {}  # per lead; None: cut at PATTERN_LIMIT
        self._shared: PatternCache = {} if shared is None else shared
        self._incomplete = False  # a pattern list was cut at PATTERN_LIMIT
        self._best: list[_State] = [_State(0, self.counts, ())]
        if sum(clipped) < 2 * need:  # at most one pipeline: its fewest GPUs are the largest ones
            self._best.extend(_one_pipeline(self.sizes, self.counts, need))
            self._exact_upto = len(self._best)
        else:
            self._exact_upto = self._levels(width)
        self._refined: dict[int, StagePlan] = {}
        self._bins_dual: _BinsDual | None = None

    # -- public ----------------------------------------------------------------------------------------------

    @property
    def k_found(self) -> int:
        """The most pipelines the search found (all there are unless `exact` says otherwise)."""
        return len(self._best) - 1

    @property
    def complete(self) -> bool:
        """Every s*(k) found is proven and no more pipelines exist."""
        return not self._incomplete and self._exact_upto > self.k_found

    @property
    def k_bound(self) -> int:
        """No more than this many pipelines can exist (k_found when the search was complete, else the LP
        relaxation's bound)."""
        if self.complete:
            return self.k_found
        if self._bins_dual is None:
            self._bins_dual = self._solve_bins_dual()
        return max(self.k_found, self._bins_dual.bins(self.counts) if self._bins_dual else 0)

    def upper(self, k: int) -> int | None:
        """Stages of the best k-pipeline solution found so far (None: none found)."""
        if k in self._refined:
            return self._refined[k].stages
        return self._best[k].used if k < len(self._best) else None

    def lower(self, k: int) -> int | None:
        """A cheap lower bound on s*(k) from capacity alone (None: the GPUs cannot hold k pipelines)."""
        return _capacity_bound(self.sizes, self.counts, k * self.need)

    def is_exact(self, k: int) -> bool:
        if k in self._refined:
            return self._refined[k].exact
        return not self._incomplete and k <= self._exact_upto

    def plan(self, k: int) -> StagePlan | None:
        """The best known solution for k pipelines (proven minimal when `.exact`)."""
        if k in self._refined:
            return self._refined[k]
        if k >= len(self._best):
            return None
        state = self._best[k]
        return StagePlan(state.used, _unwind(state.path), self.is_exact(k))

    def exact(self, k: int) -> StagePlan | None:
        """s*(k) proven (or, past the state limit, the best found, marked inexact); None when infeasible."""
        if k < 1:
            raise ValueError("k must be at least 1")
        if self.is_exact(k) or k in self._refined:
            return self.plan(k)
        result = self._refine(k)
        if result is not None:
            self._refined[k] = result
        return result

    def table(self) -> list[int | None]:
        """[s*(0), s*(1), ...] up to the largest feasible k, every entry proven when possible."""
        out: list[int | None] = [0]
        for k in range(1, self.k_bound + 1):
            plan = self.exact(k)
            if plan is None:
                break
            out.append(plan.stages)
        return out

    # -- the level-by-level search ---------------------------------------------------------------------------

    def _levels(self, width: int) -> int:
        """Fills `_best` level by level; returns the last level known exact (past the end: all of them)."""
        most = sum(map(mul, self.sizes, self.counts)) // self.need  # more pipelines cannot fit
        frontier = [self._best[0]]
        exact_upto = 0
        truncated = False
        while len(self._best) <= most:
            previous = frontier[0] if len(frontier) == 1 else None
            frontier, cut = self._expand(frontier, width)
            if not frontier:
                break
            self._best.append(frontier[0])
            # a repeat needs room for one more pipeline, so none past `most`
            if previous is not None and len(frontier) == 1 and len(self._best) <= most:
                self._best.extend(self._repeat(frontier[0]))
                frontier = [self._best[-1]]
            if not truncated:
                exact_upto = len(self._best) - 1
            truncated = truncated or cut
        return exact_upto if truncated else len(self._best)

    def _repeat(self, current: _State) -> list[_State]:
        """Levels that repeat the last pattern. A lone state expands to a lone state; while no count in its
        pattern falls below what one pipeline can use, the next state offers the same patterns and so
        expands the same way, shifted: those levels need no search."""
        pattern: Counts = current.path[1]  # type: ignore[assignment]
        steps = min(
            (have - threshold) // n + 1
            for have, threshold, n in zip(current.rem, self._thresholds, pattern, strict=True)
            if n
        )
        out = []
        state = current
        for _ in range(steps):
            rem = tuple(a - b for a, b in zip(state.rem, pattern, strict=True))
            state = _State(state.used + sum(pattern), rem, (state.path, pattern))
            out.append(state)
        return out

    def _expand(self, frontier: list[_State], limit: int | None = None) -> tuple[list[_State], bool]:
        """Every state one pipeline further, Pareto-pruned, fewest stages first; with `limit`, only the best
        `limit` states and whether others were dropped."""
        best: dict[Counts, _State] = {}
        for state in frontier:
            lead = _lead(state.rem)
            if lead < 0:
                continue  # nothing left
            for pattern, size in self._feasible(lead, state.rem):
                rem = tuple(map(sub, state.rem, pattern))
                used = state.used + size
                old = best.get(rem)
                if old is None or old.used > used:
                    best[rem] = _State(used, rem, (state.path, pattern))
        return _pareto(list(best.values()), limit)

    def _feasible(self, lead: int, rem: Counts) -> list[tuple[Counts, int]]:
        """The minimal patterns led by class `lead` that `rem` can supply (memoized on what can matter).

        Minimality does not depend on what is left, so they are the whole cluster's patterns that fit in
        `rem`; only when that list was cut short are they generated for `rem` itself."""
        usable = tuple(map(min, rem, self._thresholds))
        key = (lead, usable)
        found = self._patterns.get(key)
        if found is None:
            if lead not in self._whole:
                patterns, cut = self._padded_patterns(lead, self._usable)
                self._whole[lead] = None if cut else patterns
            whole = self._whole[lead]
            if whole is None:
                found, cut = self._padded_patterns(lead, usable)
                self._incomplete = self._incomplete or cut
            elif usable == self._usable:  # all of them fit: nothing a pattern can use is used up yet
                found = whole
            else:
                found = [pc for pc in whole if all(map(le, pc[0], usable))]
            self._patterns[key] = found
        return found

    def _padded_patterns(self, lead: int, usable: Counts) -> tuple[list[tuple[Counts, int]], bool]:
        """The minimal patterns led by `lead` within `usable` (shared between searches), over every class."""
        shared_key = (self.need, self.sizes[lead:], usable[lead:])
        if shared_key not in self._shared:
            self._shared[shared_key] = self._generate_patterns(lead, usable[lead:])
        tail, cut = self._shared[shared_key]
        return [((0,) * lead + pattern, size) for pattern, size in tail], cut

    def _generate_patterns(self, lead: int, caps: Counts) -> tuple[tuple[tuple[Counts, int], ...], bool]:
        """Minimal patterns over classes lead.. with at least one GPU of class `lead`, within `caps`, and
        whether the list was cut at PATTERN_LIMIT."""
        sizes = self.sizes[lead:]
        need, last = self.need, len(sizes) - 1
        out: list[tuple[Counts, int]] = []
        chosen = [0] * len(sizes)

        def walk(i: int, total: int, smallest: int, used: int) -> None:
            size = sizes[i]
            short = need - total
            top = min(caps[i], -(-short // size))
            if i == last:  # only the fewest that reach `need` can be minimal
                if (
                    top * size >= short
                    and (top or i == 0)
                    and top * size + total - min(size, smallest) < need
                ):
                    chosen[i] = top
                    out.append((tuple(chosen), used + top))
                    chosen[i] = 0
                return
            for c in range(top, 0 if i == 0 else -1, -1):
                if len(out) >= PATTERN_LIMIT:
                    break
                chosen[i] = c
                reached = total + c * size
                if reached >= need:
                    if reached - size < need:
                        out.append((tuple(chosen), used + c))
                else:
                    walk(i + 1, reached, size if c else smallest, used + c)
            chosen[i] = 0

        walk(0, 0, need, 0)
        return tuple(out), len(out) >= PATTERN_LIMIT

    # -- proving one level -----------------------------------------------------------------------------------

    def _refine(self, k: int) -> StagePlan | None:
        """Proves level k with an LP bound, searching below the incumbent when the bound leaves a gap."""
        if k > self.k_bound:
            return None
        incumbent = self.plan(k)
        upper = incumbent.stages if incumbent else math.inf
        cost_dual = self._cost_dual(k)
        bins_dual = self._bins_dual
        if cost_dual is None or bins_dual is None:
            return None  # even the LP relaxation cannot form k pipelines
        if incumbent and math.ceil(cost_dual.bound(self.counts, k) - 1e-6) >= upper:
            return StagePlan(incumbent.stages, incumbent.patterns, not self._incomplete)
        best: _State | None = None
        frontier = [_State(0, self.counts, ())]
        explored = 0
        for level in range(1, k + 1):
            frontier, _ = self._expand(frontier)
            explored += len(frontier)
            left = k - level
            kept = []
            for state in frontier:
                if left == 0:
                    if state.used < upper:
                        best, upper = state, state.used
                    continue
                if bins_dual.bins(state.rem) < left:
                    continue
                bound = max(
                    _capacity_bound(self.sizes, state.rem, left * self.need) or 0,
                    math.ceil(cost_dual.bound(state.rem, left) - 1e-6),
                )
                if state.used + bound < upper:
                    kept.append(state)
            frontier = kept
            if explored > STATE_LIMIT:
                break
        proven = explored <= STATE_LIMIT and not self._incomplete
        if best is not None:
            return StagePlan(best.used, _unwind(best.path), proven)
        if incumbent is not None:
            return StagePlan(incumbent.stages, incumbent.patterns, proven)
        return None

    def _lp_patterns(self) -> tuple[np.ndarray, np.ndarray]:
        """Every minimal pattern the whole cluster can supply, as a matrix, and the GPUs in each."""
        patterns: list[Counts] = []
        for lead in range(len(self.sizes)):
            patterns.extend(p for p, _ in self._feasible(lead, self.counts))
        matrix = np.array(patterns, dtype=float).reshape(len(patterns), len(self.sizes))
        return matrix, matrix.sum(axis=1)

    def _solve_bins_dual(self) -> _BinsDual | None:
        """min counts.pi  s.t.  p.pi >= 1 for every pattern p, pi >= 0 (the LP bound on pipelines)."""
        from scipy.optimize import linprog

        p, _ = self._lp_patterns()
        if not len(p):
            return None
        result = linprog(self.counts, A_ub=-p, b_ub=-np.ones(len(p)), bounds=[(0, None)] * p.shape[1])
        return _BinsDual(result.x) if result.status == 0 and result.x is not None else None

    def _cost_dual(self, k: int) -> _CostDual | None:
        """max k*mu - counts.pi  s.t.  mu - p.pi <= |p|, mu >= 0, pi >= 0 (None: the LP cannot form k)."""
        from scipy.optimize import linprog

        p, sizes = self._lp_patterns()
        if not len(p):
            return None
        result = linprog(
            np.concatenate([[-float(k)], self.counts]),
            A_ub=np.hstack([np.ones((len(p), 1)), -p]),
            b_ub=sizes,
            bounds=[(0, None)] * (p.shape[1] + 1),
        )
        return (
            _CostDual(float(result.x[0]), result.x[1:])
            if result.status == 0 and result.x is not None
            else None
        )


@dataclass(frozen=True)
class _CostDual:
    """A dual solution (mu, pi) of min sum |p| y_p s.t. sum y_p >= b, sum y_p p <= rem: for any rem and b,
    b*mu - pi.rem bounds the stages from below."""

    mu: float
    pi: np.ndarray

    def bound(self, rem: Counts, bins: int) -> float:
        return bins * self.mu - float(np.dot(self.pi, rem))


@dataclass(frozen=True)
class _BinsDual:
    """A dual solution pi of max sum y_p s.t. sum y_p p <= rem: at most floor(pi.rem) pipelines remain."""

    pi: np.ndarray

    def bins(self, rem: Counts) -> int:
        return math.floor(float(np.dot(self.pi, rem)) + 1e-6)


def _pareto(states: list[_State], limit: int | None) -> tuple[list[_State], bool]:
    """The states no other one dominates (prefix counts at least as large everywhere), fewest stages first;
    at most `limit` of them, and whether more existed."""
    if len(states) < 2:
        return states, False
    # fewest stages first, then the largest prefixes; prefixes compare as the counts do (equal prefixes up to
    # a class mean equal counts up to it), and rem is unique per state, so two stable sorts order them
    states.sort(key=_REM, reverse=True)
    states.sort(key=_USED)
    kept: list[tuple[int, ...]] = []
    out: list[_State] = []
    for state in states:
        prefix = tuple(accumulate(state.rem))  # GPUs left at or above each capacity class
        for other in kept:
            if all(map(ge, other, prefix)):
                break  # dominated
        else:
            if limit is not None and len(out) == limit:
                return out, True
            kept.append(prefix)
            out.append(state)
    return out, False


def _lead(rem: Counts) -> int:
    """The largest capacity class with GPUs left (-1: none)."""
    for i, count in enumerate(rem):
        if count:
            return i
    return -1


def _capacity_bound(sizes: Sequence[int], counts: Sequence[int], need: int) -> int | None:
    """Fewest GPUs, largest first, whose capacities sum to `need` (None when all of them fall short)."""
    if need <= 0:
        return 0
    taken = 0
    for size, n in zip(sizes, counts, strict=True):
        if n * size >= need:
            return taken - (-need // size)
        need -= n * size
        taken += n
    return None


def _one_pipeline(sizes: Sequence[int], counts: Counts, need: int) -> list[_State]:
    """The one pipeline the level search would pick, without searching: the fewest GPUs, with at least one
    of the largest class, and of those the set that leaves the most large GPUs over (for extra shards)."""
    left = _capacity_bound(sizes, counts, need)
    if left is None:
        return []
    pattern = [0] * len(sizes)
    for i, size in enumerate(sizes):
        if need <= 0:  # full: the smaller classes give nothing
            break
        take = 1 if i == 0 else 0  # the smallest count that still lets the smaller classes finish
        while take * size + _largest_sum(sizes, counts, i + 1, left - take) < need:
            take += 1
        pattern[i] = take
        left -= take
        need -= take * size
    rem = tuple(map(sub, counts, pattern))
    return [_State(sum(pattern), rem, ((), tuple(pattern)))]


def _largest_sum(sizes: Sequence[int], counts: Sequence[int], first: int, gpus: int) -> int:
    """Capacity of the `gpus` largest GPUs of the classes from `first` on."""
    total = 0
    for i in range(first, len(sizes)):
        take = min(counts[i], gpus)
        total += take * sizes[i]
        gpus -= take
    return total


def _unwind(path: Path) -> tuple[Counts, ...]:
    out: list[Counts] = []
    while path:
        path, pattern = path  # type: ignore[assignment]
        out.append(pattern)  # type: ignore[arg-type]
    return tuple(reversed(out))
