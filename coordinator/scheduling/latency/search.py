"""Our scheduler: a breadth-first branch and bound over cycles, vectorised level by level, width-bounded.

Level k holds partial cycles r -> ... -> u of k distinct machines. Three facts keep it small:

- A cycle is searched once per rotation: its root r is its fastest machine (machines are ranked by per-layer
  latency, then capacity), so only slower-ranked machines are appended.
- Two partial cycles with the same machine set and the same last machine have the same futures, so only the
  one with the shorter links so far is kept (dynamic programming over (set, end), as in Held-Karp).
- The layer split of a set is decided only when the cycle closes, and optimally (one layer each, the rest to
  the fastest machines first), so it never depends on the order the search met the machines in.

A partial cycle is dropped when a lower bound on every completion is no better than the best cycle closed so
far. Completion = more machines Q (possibly none) and the hop back to r; its cost is at least
  links so far + max( shortest path u ~> r + fill(V + Q at compute price),
                      cheapest hop into r + LP fill where a new machine q's layers also pay its cheapest
                      incoming hop spread over its capacity (the LP relaxation of "each stage has one
                      incoming link") )
where fill is the cheapest placement of the remaining layers, each chosen machine holding at least one.

When a level has more than `width` survivors, only `width` of them go on and the result is no longer proven
optimal. They are the ones with the lowest projected TPOT: compute floor plus links so far scaled up to the
whole model (links per layer covered so far, times L). Ranking by the lower bound instead keeps partial cycles
that merely have not paid for their hops yet; on Ren testbed 4 at width 128 it ended 1.9% above the optimum on
average, the projection 0.3%.

`ours` starts from the cycle of the report's one-pass heuristic, split fastest first (so it is never worse
than that heuristic), and runs one pass of this search against it. A good incumbent is what makes the pass
cheap: pruning against it, a pass at width 2048 ran in about a third of the greedy heuristic's time on Ren
testbeds 1-3 and a seventh on testbed 4; from no incumbent the same pass took 4 to 10 times longer. Past 44
machines the width shrinks (ROW_BUDGET) so that a level's arrays stay near 4 million numbers: at 128 to 256
noisy machines the search then rarely improves on its starting cycle, but stays within seconds. An explicit
width is used as given.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from coordinator.scheduling.latency.greedy import one_pass_cycle
from coordinator.scheduling.latency.problem import LatencyProblem
from coordinator.scheduling.latency.schedule import (
    LatencySchedule,
    cycle_cost,
    fastest_first_split,
    make_schedule,
)

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

DEFAULT_WIDTH = 2048
# A level holds up to width x machines^2 numbers; past 44 machines the default width shrinks to bound that.
ROW_BUDGET = 4_000_000


@dataclass(frozen=True)
class _Tables:
    """Per-problem tables, machines re-indexed by rank (fastest first)."""

    machine: IntArray  # rank -> original machine index
    t: FloatArray
    cap: IntArray
    link: FloatArray  # one-way latency, diagonal +inf
    shortest: FloatArray  # all-pairs shortest path over links
    cheapest_in: FloatArray  # cheapest hop into each machine
    item_order: IntArray  # LP items (residual of visited, then unvisited) sorted by price
    item_price: FloatArray


def _tables(problem: LatencyProblem) -> _Tables:
    """Rank the machines that can hold a layer; precompute what every level's bounds read."""
    holders = np.flatnonzero(problem.capacity > 0)
    t_all, cap_all = problem.layer_ms[holders], problem.capacity[holders]
    rank = holders[np.lexsort((-cap_all, t_all))]
    t, cap = problem.layer_ms[rank], problem.capacity[rank]
    link = problem.link_ms[np.ix_(rank, rank)].copy()
    np.fill_diagonal(link, np.inf)
    shortest = link.copy()
    np.fill_diagonal(shortest, 0.0)
    for k in range(len(rank)):
        np.minimum(shortest, shortest[:, k : k + 1] + shortest[k : k + 1, :], out=shortest)
    cheapest_in = link.min(axis=0) if len(rank) > 1 else np.zeros(1)
    price = np.concatenate([t, t + cheapest_in / cap])
    order = np.argsort(price, kind="stable")
    return _Tables(rank, t, cap, link, shortest, cheapest_in, order, price[order])


def _fill(counts: FloatArray, left: int, price: FloatArray) -> FloatArray:
    """Cheapest cost of `left` layers per row from item quantities `counts` already sorted by `price`."""
    total = np.cumsum(counts, axis=1)
    take = np.minimum(counts, np.maximum(left - (total - counts), 0.0))
    return np.where(total[:, -1] < left, np.inf, take @ price)


@dataclass
class _Level:
    """Partial cycles as arrays, one row each: root, last machine, links so far, machine set, parent row."""

    root: IntArray
    end: IntArray
    links: FloatArray
    mask: BoolArray
    parent: IntArray

    def take(self, rows: IntArray) -> _Level:
        return _Level(self.root[rows], self.end[rows], self.links[rows], self.mask[rows], self.parent[rows])


def _extend(level: _Level, floor: FloatArray, tab: _Tables, best: float) -> _Level:
    """Every partial cycle extended by every slower-ranked unused machine; of the rows with the same set and
    last machine only the one with the least links is kept.

    `floor` is each row's compute bound (its machines plus any allowed others); adding a machine can only
    raise it, so a child whose links plus shortest way home plus that floor reach `best` is never built.
    """
    n = level.mask.shape[1]
    rows, nxt = np.nonzero(~level.mask & (np.arange(n)[None, :] > level.root[:, None]))
    links = level.links[rows] + tab.link[level.end[rows], nxt]
    hopeful = links + tab.shortest[nxt, level.root[rows]] + floor[rows] < best
    rows, nxt, links = rows[hopeful], nxt[hopeful], links[hopeful]
    mask = level.mask[rows]
    mask[np.arange(len(rows)), nxt] = True
    packed = np.packbits(mask, axis=1)
    order = np.lexsort((links, nxt, *packed.T))
    keys = np.column_stack([packed[order], nxt[order]])
    first = np.ones(len(order), dtype=bool)
    first[1:] = np.any(keys[1:] != keys[:-1], axis=1)
    keep = order[first]
    return _Level(level.root[rows[keep]], nxt[keep], links[keep], mask[keep], rows[keep])


def _closed_cost(level: _Level, tab: _Tables, n_layers: int) -> FloatArray:
    """TPOT of closing every row now (+inf where its machines cannot hold the model)."""
    k = int(level.mask[0].sum())
    hop = tab.link[level.end, level.root] if k > 1 else np.zeros(len(level.root))
    residual = level.mask * (tab.cap - 1.0)
    return level.links + hop + level.mask @ tab.t + _fill(residual, n_layers - k, tab.t)


def _bound(level: _Level, tab: _Tables, n_layers: int, best: float) -> tuple[FloatArray, FloatArray]:
    """(lower bound on every completion that adds at least one more machine, compute floor) per row.

    The cheaper bound (shortest path home, compute price) goes first; the charged one only for the rows that
    survive it. The compute floor is the compute part of the cheaper bound.
    """
    n = len(tab.t)
    k = int(level.mask[0].sum())
    visited = level.mask @ tab.t
    residual = level.mask * (tab.cap - 1.0)
    spare = (~level.mask & (np.arange(n)[None, :] > level.root[:, None])) * tab.cap.astype(np.float64)
    floor = visited + _fill(residual + spare, n_layers - k, tab.t)
    bound = level.links + tab.shortest[level.end, level.root] + floor
    bound[~spare.any(axis=1) | (k >= n_layers)] = np.inf
    rows = np.flatnonzero(bound < best)
    items = np.concatenate([residual[rows], spare[rows]], axis=1)[:, tab.item_order]
    charged = level.links[rows] + visited[rows] + tab.cheapest_in[level.root[rows]]
    bound[rows] = np.maximum(bound[rows], charged + _fill(items, n_layers - k, tab.item_price))
    return bound, floor


def _path(level: _Level, row: int, history: list[_Level]) -> list[int]:
    """The machines of `row`, root first, followed back through the parents kept in `history`."""
    path = [int(level.end[row])]
    parent = int(level.parent[row])
    for previous in reversed(history):
        if parent < 0:
            break
        path.append(int(previous.end[parent]))
        parent = int(previous.parent[parent])
    return path[::-1]


def _search(
    tab: _Tables, n_layers: int, width: int, best: float, best_path: list[int]
) -> tuple[float, list[int], bool]:
    """One pass at `width`, pruning against an incumbent; returns (TPOT, path by rank, proven optimal)."""
    n = len(tab.t)
    ranks = np.arange(n)
    level = _Level(ranks, ranks.copy(), np.zeros(n), np.eye(n, dtype=bool), np.full(n, -1))
    history: list[_Level] = []
    exact = True
    while len(level.root):
        closed = _closed_cost(level, tab, n_layers)
        row = int(np.argmin(closed))
        if closed[row] < best:
            best, best_path = float(closed[row]), _path(level, row, history)
        bound, floor = _bound(level, tab, n_layers, best)
        alive = np.flatnonzero(bound < best)
        if len(alive) > width:
            covered = np.minimum(level.mask[alive] @ tab.cap, n_layers)
            projected = floor[alive] + level.links[alive] * n_layers / covered
            alive = alive[np.argpartition(projected, width)[:width]]
            exact = False
        history.append(level.take(alive))
        level = _extend(history[-1], floor[alive], tab, best)
    return best, best_path, exact


def ours(problem: LatencyProblem, width: int | None = None) -> LatencySchedule:
    """The one-pass heuristic's cycle split fastest first, improved by one search pass; `optimal` when that
    pass was not truncated. `width` defaults to DEFAULT_WIDTH, less past 44 machines (ROW_BUDGET)."""
    if width is not None and width < 1:
        raise ValueError(f"width must be at least 1, got {width}")
    problem.check_feasible()
    tab = _tables(problem)
    seed, _ = one_pass_cycle(problem)
    compute, link = cycle_cost(problem, seed, fastest_first_split(problem, seed))
    rank = {int(machine): r for r, machine in enumerate(tab.machine)}  # machines with room, all on any cycle
    if width is None:
        width = max(1, min(DEFAULT_WIDTH, ROW_BUDGET // len(tab.t) ** 2))
    _, path, exact = _search(tab, problem.num_layers, width, compute + link, [rank[i] for i in seed])
    order = [int(i) for i in tab.machine[path]]
    return make_schedule(problem, order, fastest_first_split(problem, order), "ours", optimal=exact)
