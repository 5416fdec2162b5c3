"""`make demo` end to end on the real model: real answers come back, and every balance in its table is
checked against the two tasks' settlements."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from demo.batch_demo import COMPLETIONS, QUESTIONS, answers_table, balance_table, run_demo
from demo.system import UNIT, SystemConfig
from tests.conftest import ROOT


def test_demo_answers_and_settles_exactly(tmp_path: Path) -> None:
    report = run_demo(tmp_path, requests=len(QUESTIONS), max_price=1 * UNIT)
    assert [a.asked for a in report.answers] == [q.text for q in (*QUESTIONS, *COMPLETIONS)]
    answers = {a.asked: a.answer for a in report.answers}
    assert "Paris" in answers["What is the capital of France?"]
    assert "Tokyo" in answers["The capital of Japan is"]
    config = SystemConfig()
    miners_paid: dict[str, int] = {}
    for task in report.tasks:
        tokens = task.input_tokens + task.output_tokens
        assert task.payment == tokens * config.price_per_million_tokens // 10**6 > 0
        assert task.fee == task.payment * config.fee_bps // 10_000
        assert sum(amount for _, amount in task.miner_amounts) == task.payment - task.fee
        for miner, amount in task.miner_amounts:
            miners_paid[miner] = miners_paid.get(miner, 0) + amount
    for row in report.rows:
        expected = {"user": -report.payment, "coordinator": report.fee}.get(row.party)
        assert row.after - row.before == (expected if expected is not None else miners_paid[row.address])
    change = {row.party: row.after - row.before for row in report.rows}
    assert sum(change.values()) == 0  # conserved: what the user paid, miners and coordinator received
    assert [c.header for c in balance_table(report).columns] == [
        "party",
        "address",
        "before",
        "after",
        "change",
    ]
    assert [c.header for c in answers_table(report).columns] == ["request", "asked", "answer"]


def test_demo_entry_point_prints_the_answers_and_the_table() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "demo"], cwd=ROOT, capture_output=True, text=True, check=True, timeout=600
    )
    assert "What is the capital of France?" in result.stdout and "Paris" in result.stdout
    assert "Wallets around tasks" in result.stdout
    assert "verified against the on-chain root" in result.stdout
