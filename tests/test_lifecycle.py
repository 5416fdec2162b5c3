"""The on-chain money flow of one task (inference simulated): every number of its balance table is exact."""

from __future__ import annotations

from demo.lifecycle import DemoConfig, balance_table, run_demo

UNIT = 10**6


def test_lifecycle_balances_are_exact() -> None:
    config = DemoConfig()
    report = run_demo(config)

    # 8 requests x 125,000 tokens = 1,000,000 tokens at 20 per million = 20; capped at max price 50
    assert report.payment == 20 * UNIT
    assert report.fee == 1 * UNIT  # 5% coordinator fee
    assert report.miner_amounts == (11_400_000, 7_600_000)  # 19 split 60/40 by layers served
    assert report.refund == 30 * UNIT

    rows = {row.party: row for row in report.rows}
    assert set(rows) == {"user", "miner A", "miner B", "coordinator"}
    expected = {
        # party: (wallet before, wallet after, stake before, stake after)
        "user": (1_000 * UNIT, 980 * UNIT, 0, 0),
        "miner A": (500 * UNIT, 311_400_000, 0, 200 * UNIT),
        "miner B": (500 * UNIT, 307_600_000, 0, 200 * UNIT),
        "coordinator": (0, 1 * UNIT, 0, 0),
    }
    for party, (wallet_before, wallet_after, stake_before, stake_after) in expected.items():
        row = rows[party]
        assert (row.wallet_before, row.wallet_after, row.stake_before, row.stake_after) == (
            wallet_before,
            wallet_after,
            stake_before,
            stake_after,
        ), party

    # money is conserved: what the user paid is exactly what miners and the coordinator gained
    net = {p: (r.wallet_after + r.stake_after) - (r.wallet_before + r.stake_before) for p, r in rows.items()}
    assert sum(net.values()) == 0
    assert net == {"user": -20 * UNIT, "miner A": 11_400_000, "miner B": 7_600_000, "coordinator": 1 * UNIT}

    table = balance_table(report)
    assert [column.header for column in table.columns] == [
        "party",
        "wallet before",
        "wallet after",
        "stake before",
        "stake after",
        "net change",
    ]
