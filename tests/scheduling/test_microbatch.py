"""DeServe's microbatch planner against the paper's example and its offloading formula."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from client_sdk.protocol.pipeline import microbatches
from coordinator.scheduling.microbatch import kv_per_microbatch, plan_microbatches


def test_paper_example_four_stages_half_stage_latency_needs_six() -> None:
    assert microbatches([20.0] * 4, [10.0] * 4) == 6


def test_no_latency_needs_one_per_stage() -> None:
    assert microbatches([7.0] * 5, [0.0] * 5) == 5


@given(
    stages=st.lists(st.floats(0.5, 500), min_size=1, max_size=12),
    latency=st.floats(0, 1_000),
)
def test_count_is_the_smallest_that_keeps_the_slowest_stage_busy(stages: list[float], latency: float) -> None:
    hops = [latency] * len(stages)
    count = microbatches(stages, hops)
    round_trip = sum(stages) + sum(hops)
    assert count * max(stages) >= round_trip * (1 - 1e-9)
    assert count == 1 or (count - 1) * max(stages) < round_trip


def test_offloading_formula() -> None:
    # 20 ms stages, 25 GB/s PCIe: M_G = 0.5 GB; 8 GB of KV over 6 microbatches
    assert kv_per_microbatch(8e9, 6, 25, 20.0) == pytest.approx((8e9 - 1e9) / 6 + 0.5e9)
    assert kv_per_microbatch(8e9, 6, None, 20.0) == pytest.approx(8e9 / 6)
    plan = plan_microbatches([20.0] * 4, [10.0] * 4, 8e9, 131_072, 1_024, pcie_gb_s=25)
    plain = plan_microbatches([20.0] * 4, [10.0] * 4, 8e9, 131_072, 1_024)
    assert plan.microbatches == plain.microbatches == 6
    assert plan.batch == int(((8e9 - 1e9) / 6 + 0.5e9) // (131_072 * 1_024))
    assert plan.batch > plain.batch  # offloading gives each microbatch more room


def test_bad_inputs() -> None:
    with pytest.raises(ValueError, match="one positive stage time"):
        microbatches([0.0], [1.0])
    with pytest.raises(ValueError, match="cannot hold two"):
        kv_per_microbatch(1e6, 2, 25, 20.0)
