"""s*(k), the fewest GPUs forming k pipelines, against brute force; and the search's shortcuts."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.scheduling.stages import StageSearch


def brute_force(capacities: list[int], need: int, k: int) -> int | None:
    """Every way to give each GPU to one of k pipelines or to none; the fewest GPUs that fill all k."""
    best = None
    for owner in itertools.product(range(k + 1), repeat=len(capacities)):
        totals = [0] * k
        for capacity, pipeline in zip(capacities, owner, strict=True):
            if pipeline < k:
                totals[pipeline] += capacity
        used = sum(1 for pipeline in owner if pipeline < k)
        if all(t >= need for t in totals) and (best is None or used < best):
            best = used
    return best


small_clusters = st.tuples(st.lists(st.integers(1, 14), min_size=1, max_size=7), st.integers(2, 16))


@settings(max_examples=150, deadline=None)
@given(small_clusters, st.sampled_from([1, 4]))
def test_min_stages_equal_brute_force(cluster: tuple[list[int], int], width: int) -> None:
    capacities, need = cluster
    search = StageSearch(capacities, need, width=width)
    table = search.table()
    for k in range(1, 4):
        expected = brute_force(capacities, need, k)
        assert (table[k] if k < len(table) else None) == expected
        plan = search.exact(k)
        if expected is None:
            assert plan is None
            continue
        assert plan is not None and plan.exact and plan.stages == expected
        assert len(plan.patterns) == k
        for pattern in plan.patterns:  # every pipeline holds the model; no class is overdrawn
            assert sum(n * size for n, size in zip(pattern, search.sizes, strict=True)) >= need
        for used, available in zip(map(sum, zip(*plan.patterns, strict=True)), search.counts, strict=True):
            assert used <= available


def test_equal_capacities_collapse_into_one_class() -> None:
    search = StageSearch([24] * 200 + [18] * 56, 68)
    assert search.sizes == (24, 18) and search.counts == (200, 56)
    assert search.plan(1) == search.exact(1)
    assert search.exact(1).stages == 3  # 24 * 3 >= 68
    # 66 triples of 24 and 14 quadruples of 18 use 254 GPUs; the 2 left over cannot make another pipeline
    assert search.exact(80).stages == 66 * 3 + 14 * 4
    assert search.exact(81) is None


def test_a_hard_mix_is_proven_by_the_lp_bound() -> None:
    """70B-like layer units on small GPUs: the frontier outgrows its width, the LP bound proves the rest."""
    capacities = [35] * 10 + [17] * 18 + [13] * 7 + [9] * 7
    search = StageSearch(capacities, 84, width=2)
    assert not search.complete
    plan = search.exact(search.k_found)
    assert plan is not None and plan.exact
    assert search.lower(search.k_found) <= plan.stages <= search.upper(search.k_found)


def test_one_pipeline_leaves_the_largest_gpus_over() -> None:
    """When only one pipeline fits, it takes the fewest GPUs and, among those, leaves the largest over (they
    make the best extra shards): 30 + 30 + 18 rather than 30 + 30 + 30."""
    search = StageSearch([30, 18, 30, 30], 68)
    plan = search.exact(1)
    assert plan is not None and plan.exact
    assert search.sizes == (30, 18) and plan.patterns == ((2, 1),)
    assert search.exact(2) is None


def level_search_first_pick(sizes: tuple[int, ...], counts: tuple[int, ...], need: int) -> tuple[int, ...]:
    """The pipeline the level search takes first, by its definition: of the minimal patterns (dropping a GPU
    of the smallest class used leaves it short) with a GPU of the largest class, the one with the fewest GPUs
    and then the most large GPUs left over (the lexicographically smallest pattern); () when there is none."""
    picks = []
    for pattern in itertools.product(range(1, counts[0] + 1), *(range(n + 1) for n in counts[1:])):
        held = sum(size * n for size, n in zip(sizes, pattern, strict=True))
        smallest = min(size for size, n in zip(sizes, pattern, strict=True) if n)
        if held >= need and held - smallest < need:
            picks.append((sum(pattern), pattern))
    return min(picks)[1] if picks else ()


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_the_one_pipeline_shortcut_is_the_level_searchs_first_pick(data: st.DataObject) -> None:
    """GPUs that cannot hold two pipelines skip the level search; the shortcut must pick what it would."""
    capacities = data.draw(st.lists(st.integers(1, 20), min_size=1, max_size=7))
    need = data.draw(st.integers(max(2, sum(capacities) // 2 + 1), sum(capacities) + 3))  # fewer than two
    search = StageSearch(capacities, need)
    plan = search.plan(1)
    expected = level_search_first_pick(search.sizes, search.counts, need)
    assert (plan.patterns if plan else ()) == ((expected,) if expected else ())
