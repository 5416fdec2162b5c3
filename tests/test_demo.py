"""`make demo` end to end: the real batch job on a local market, every balance in its table checked."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from demo.batch_demo import balance_table, run_demo
from demo.system import UNIT, SystemConfig
from tests.conftest import ROOT


def test_demo_settles_exactly(tmp_path: Path) -> None:
    report = run_demo(tmp_path, requests=8, max_price=1 * UNIT)
    config = SystemConfig()
    tokens = report.input_tokens + report.output_tokens
    assert report.payment == tokens * config.price_per_million_tokens // 10**6 > 0
    assert report.fee == report.payment * config.fee_bps // 10_000
    assert len(report.samples) == 3
    paid = dict(report.miner_amounts)
    assert sum(paid.values()) == report.payment - report.fee
    for row in report.rows:
        expected = {"user": -report.payment, "coordinator": report.fee}.get(row.party, paid.get(row.address))
        assert row.after - row.before == expected, row.party
    change = {row.party: row.after - row.before for row in report.rows}
    assert sum(change.values()) == 0  # conserved: what the user paid, miners and coordinator received
    assert [c.header for c in balance_table(report).columns] == [
        "party",
        "address",
        "before",
        "after",
        "change",
    ]


def test_demo_entry_point_prints_the_table() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "demo"], cwd=ROOT, capture_output=True, text=True, check=True, timeout=600
    )
    assert "Wallets around task" in result.stdout
    assert "verified against the on-chain root" in result.stdout
