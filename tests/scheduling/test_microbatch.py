"""DeServe's microbatch planner against the paper's example and its offloading formula."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coordinator.scheduling.microbatch import microbatches_in_flight, plan_microbatches


def test_paper_example_four_stages_half_stage_latency_needs_six() -> None:
    assert microbatches_in_flight(stage_time_ms=20.0, one_way_latency_ms=10.0, stages=4) == 6


def test_no_latency_needs_one_per_stage() -> None:
    assert microbatches_in_flight(stage_time_ms=7.0, one_way_latency_ms=0.0, stages=5) == 5


@given(
    stage=st.floats(0.5, 500),
    latency=st.floats(0, 1_000),
    stages=st.integers(1, 16),
)
def test_count_is_the_smallest_that_fills_the_ring(stage: float, latency: float, stages: int) -> None:
    count = microbatches_in_flight(stage, latency, stages)
    round_trip = stages * (stage + latency)
    assert count * stage >= round_trip * (1 - 1e-9)  # enough work to cover a microbatch's round trip
    assert (count - 1) * stage < round_trip  # and one fewer would leave a stage idle


def test_offloading_formula() -> None:
    # 20 ms stages, 25 GB/s PCIe: M_G = 0.5 GB; 8 GB of KV over 6 microbatches
    plan = plan_microbatches(
        20.0, 10.0, 4, 8e9, kv_bytes_per_token=131_072, context_tokens=1_024, pcie_gb_s=25
    )
    assert plan.microbatches == 6
    assert plan.global_pool_bytes == pytest.approx(0.5e9)
    assert plan.kv_bytes_per_microbatch == pytest.approx((8e9 - 1e9) / 6 + 0.5e9)
    assert plan.tokens_per_microbatch == int(plan.kv_bytes_per_microbatch // 131_072)
    assert plan.batch_size == plan.tokens_per_microbatch // 1_024
    plain = plan_microbatches(20.0, 10.0, 4, 8e9, kv_bytes_per_token=131_072, context_tokens=1_024)
    assert plain.kv_bytes_per_microbatch == pytest.approx(8e9 / 6)
    assert plan.batch_size > plain.batch_size  # offloading gives each microbatch more room


def test_bad_inputs() -> None:
    with pytest.raises(ValueError, match="stage time must be positive"):
        microbatches_in_flight(0.0, 1.0, 4)
    with pytest.raises(ValueError, match="KV budget"):
        plan_microbatches(10.0, 1.0, 2, 0, 1, 1)
