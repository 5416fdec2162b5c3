"""`make demo` end to end on the real model, run once as the README runs it: real answers come back, the
entry point prints them with the balance table, and every balance in that table is checked against the two
tasks' settlements (from the report the demo writes with --report)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from demo.batch_demo import (
    COMPLETIONS,
    QUESTIONS,
    Answer,
    BalanceRow,
    DemoReport,
    Settlement,
    answers_table,
    balance_table,
)
from demo.system import SystemConfig
from tests.conftest import ROOT

# The demo is the whole system on the real model; on two cores shared with the rest of `make test` it took
# over pytest's default 300 s (56 s alone). A hang still fails, at the subprocess's own timeout.
pytestmark = pytest.mark.timeout(660)


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, DemoReport]:
    """`python -m demo`'s output and the report it wrote."""
    report_file = tmp_path_factory.mktemp("demo") / "report.json"
    result = subprocess.run(
        [sys.executable, "-m", "demo", "--report", str(report_file)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    return result.stdout, read_report(report_file)


def read_report(path: Path) -> DemoReport:
    data = json.loads(path.read_text())
    return DemoReport(
        tasks=tuple(
            Settlement(**(t | {"miner_amounts": tuple(tuple(pair) for pair in t["miner_amounts"])}))
            for t in data["tasks"]
        ),
        answers=tuple(Answer(**a) for a in data["answers"]),
        rows=tuple(BalanceRow(**r) for r in data["rows"]),
    )


def test_demo_answers_and_settles_exactly(demo_run: tuple[str, DemoReport]) -> None:
    _, report = demo_run
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


def test_demo_entry_point_prints_the_answers_and_the_table(demo_run: tuple[str, DemoReport]) -> None:
    stdout, report = demo_run
    assert "What is the capital of France?" in stdout and "Paris" in stdout
    assert "Wallets around tasks" in stdout
    assert "verified against the on-chain root" in stdout
    assert "market explorer (while the demo runs): http://127.0.0.1:" in stdout
    for row in report.rows:
        assert row.address in stdout  # the balance table printed is the report's
