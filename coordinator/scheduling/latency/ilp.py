"""The reference integer program (scipy's HiGHS MILP), time-limited like the report's ILP baselines.

Variables per machine i: used y_i, root r_i (the stage holding layer 0), layers l_i, first layer s_i; per
ordered pair x_ij = "the token goes from i to j" (x_ii is a one-machine cycle, allowed only at the root).

    minimise   sum_i t_i l_i + sum_ij d_ij x_ij
    subject to sum_j x_ij = y_i = sum_j x_ji          (a used machine has one successor and one predecessor)
               sum_i r_i = 1,  r_i <= y_i,  x_ii <= r_i
               y_i <= l_i <= cap_i y_i,  sum_i l_i = L,  s_i + l_i <= L
               s_j >= s_i + l_i - L (1 - x_ij) - L r_j   (i != j: layers run on round the cycle, except
                                                          into the root)

The last family forbids every cycle that misses the root (it would need s to grow all the way round), so the
x_ij form one cycle through the root and the l_i give each stage its contiguous range.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import coo_array

from coordinator.scheduling.latency.problem import LatencyProblem
from coordinator.scheduling.latency.schedule import LatencySchedule, make_schedule


class SolverTimeout(RuntimeError):
    """The solver found no feasible schedule within its time limit."""


class _Rows:
    """Sparse constraint rows collected as (row, column, value) triplets."""

    def __init__(self) -> None:
        self.rows: list[int] = []
        self.cols: list[int] = []
        self.vals: list[float] = []
        self.lower: list[float] = []
        self.upper: list[float] = []

    def add(self, terms: list[tuple[int, float]], lower: float, upper: float) -> None:
        row = len(self.lower)
        for col, val in terms:
            self.rows.append(row)
            self.cols.append(col)
            self.vals.append(val)
        self.lower.append(lower)
        self.upper.append(upper)

    def constraint(self, n_vars: int) -> LinearConstraint:
        matrix = coo_array((self.vals, (self.rows, self.cols)), shape=(len(self.lower), n_vars)).tocsr()
        return LinearConstraint(matrix, self.lower, self.upper)


def ilp(problem: LatencyProblem, time_limit_s: float = 16.0) -> LatencySchedule:
    """Solves the program above; `optimal` is set when HiGHS proves optimality within the time limit."""
    problem.check_feasible()
    n, n_layers = len(problem.machines), problem.num_layers
    t, cap, d = problem.layer_ms, problem.capacity, problem.link_ms
    y, r, held, s = (np.arange(n) + k * n for k in range(4))
    x = 4 * n + np.arange(n * n).reshape(n, n)
    n_vars = 4 * n + n * n

    cost = np.zeros(n_vars)
    cost[held] = t
    cost[x] = d
    cost[x[np.arange(n), np.arange(n)]] = 0.0
    upper = np.ones(n_vars)
    upper[held] = np.minimum(cap, n_layers)
    upper[s] = n_layers
    integrality = np.ones(n_vars, dtype=np.uint8)
    integrality[s] = 0

    rows = _Rows()
    for i in range(n):
        rows.add([(int(x[i, j]), 1.0) for j in range(n)] + [(int(y[i]), -1.0)], 0, 0)
        rows.add([(int(x[j, i]), 1.0) for j in range(n)] + [(int(y[i]), -1.0)], 0, 0)
        rows.add([(int(r[i]), 1.0), (int(y[i]), -1.0)], -math.inf, 0)
        rows.add([(int(x[i, i]), 1.0), (int(r[i]), -1.0)], -math.inf, 0)
        rows.add([(int(held[i]), 1.0), (int(y[i]), -1.0)], 0, math.inf)
        rows.add([(int(held[i]), 1.0), (int(y[i]), -float(cap[i]))], -math.inf, 0)
        rows.add([(int(s[i]), 1.0), (int(held[i]), 1.0)], -math.inf, n_layers)
        for j in range(n):
            if i != j:
                terms = [(int(s[i]), 1.0), (int(held[i]), 1.0), (int(s[j]), -1.0)]
                terms += [(int(x[i, j]), float(n_layers)), (int(r[j]), -float(n_layers))]
                rows.add(terms, -math.inf, n_layers)
    rows.add([(int(i), 1.0) for i in r], 1, 1)
    rows.add([(int(i), 1.0) for i in held], n_layers, n_layers)

    result = milp(
        cost,
        constraints=rows.constraint(n_vars),
        integrality=integrality,
        bounds=Bounds(np.zeros(n_vars), upper),
        options={"time_limit": time_limit_s, "disp": False},
    )
    if result.x is None:
        raise SolverTimeout(f"HiGHS found no feasible schedule within {time_limit_s:g} s ({result.message})")
    sol = np.rint(result.x).astype(np.int64)
    root = int(np.argmax(sol[r]))
    order = [root]
    while (nxt := int(np.argmax(sol[x[order[-1]]]))) != root:
        order.append(nxt)
    layers = [int(sol[held[i]]) for i in order]
    return make_schedule(problem, order, layers, "ilp", optimal=result.status == 0)
