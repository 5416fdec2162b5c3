"""The fault matrix's fast subset (bench/faults.py has every row): one batch over a 2-stage pipeline with a
spare, during which Redis, then PostgreSQL, then the pipeline's first-stage miner crash (SIGKILL) and come
back. Every line completes exactly once, none fails, settlement pays everyone exactly, and the pipeline then
serves the next batch whole."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from bench.faults import run_fault


def test_crashes_of_redis_postgresql_and_a_stage_lose_no_line_and_no_unit(tmp_path: Path) -> None:
    try:
        row = run_fault(("redis", "postgresql", "first-stage miner"), tmp_path, lines=96, max_tokens=16)
    except FileNotFoundError as exc:  # no PostgreSQL server binaries on this machine
        pytest.skip(f"PostgreSQL tests skipped: cannot start a server ({exc})")
    assert dataclasses.asdict(row) | {"seconds": 0, "recovery_s": 0} == {
        "fault": "redis + postgresql + first-stage miner",
        "lines": 96,
        "completed": 96,
        "failed": 0,
        "duplicated": 0,
        "lost": 0,
        "seconds": 0,
        "recovery_s": 0,
        "balances_exact": True,
        "status": "completed",
        "next_batch": True,
    }
