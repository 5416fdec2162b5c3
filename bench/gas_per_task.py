"""Gas per task versus the number of requests in the batch, measured on a real anvil chain.

The lifecycle (create, assign, commit, finalize) runs once per batch size through the SDK, each from the same
chain snapshot and with the same usage and payment, so only the request count differs. Each transaction's gas
is split into execution gas (what the contracts do) and intrinsic gas (21,000 plus 4 or 16 per calldata byte:
a larger request count has more nonzero bytes, e.g. +12 gas for 50,000 over 10). The baseline is the
10-request batch of the same run: an execution ratio of exactly 1.000 everywhere means the contracts do no
per-request work on-chain.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import cast

from rich.table import Table
from web3.types import TxData

from bench._report import figure, publish, report_table
from client_sdk.chain.anvil import Anvil, dev_accounts
from client_sdk.chain.contracts import Market, connect
from client_sdk.chain.deploy import DeployParams, deploy
from client_sdk.eip712 import sign_commitment
from demo.lifecycle import (
    DemoConfig,
    Parties,
    accept_task,
    create_task,
    fund,
    price_results,
    register_with_cli,
    simulate_inference,
)

REQUEST_COUNTS = (10, 100, 1_000, 50_000, 1_000_000)
BASELINE = 10
STEPS = ("create", "assign", "commit", "finalize")


def last_tx_gas(market: Market) -> tuple[int, int]:
    """(execution gas, intrinsic gas) of the latest block's only transaction."""
    block = market.w3.eth.get_block("latest", full_transactions=True)
    (tx,) = block["transactions"]
    data = bytes(cast(TxData, tx)["input"])  # full_transactions: the transaction, not its hash
    intrinsic = 21_000 + sum(16 if byte else 4 for byte in data)
    return int(block["gasUsed"]) - intrinsic, intrinsic


def measure(node: Anvil, market: Market, parties: Parties, requests: int) -> dict[str, tuple[int, int]]:
    """(execution, intrinsic) gas of each lifecycle step for one task of `requests` requests."""
    config = DemoConfig(requests=requests)
    gas: dict[str, tuple[int, int]] = {}
    market.token.mint(parties.user.address, config.max_price)
    task_id = create_task(market.as_account(parties.user), config)
    gas["create"] = last_tx_gas(market)
    miners = [m.address for m in parties.miners]
    acceptances = accept_task(market, task_id, list(parties.miners), config.stake_lock)
    market.as_account(parties.coordinator).tasks.assign_task(task_id, miners, config.stake_lock, acceptances)
    gas["assign"] = last_tx_gas(market)
    # The results tree is built off-chain and the chain sees only its root, so the demo's 8 leaves stand in
    # for every batch size (the signatures name the task's own request count); that also keeps usage and
    # payment equal across sizes.
    leaves = simulate_inference(task_id, DemoConfig(), miners)
    commitment = replace(price_results(market, task_id, leaves, miners, config), request_count=requests)
    signatures = [
        sign_commitment(m, commitment, m.address, node.w3.eth.chain_id, market.tasks.address)
        for m in parties.miners
    ]
    market.as_account(parties.coordinator).tasks.commit_results(commitment, signatures)
    gas["commit"] = last_tx_gas(market)
    node.advance_time(3_600)
    market.as_account(parties.user).tasks.finalize_task(task_id)
    gas["finalize"] = last_tx_gas(market)
    return gas


def run(scratch: Path) -> dict[int, dict[str, tuple[int, int]]]:
    accounts = dev_accounts()
    parties = Parties(accounts[0], accounts[1], accounts[2], (accounts[3], accounts[4]))
    with Anvil() as node:
        deploy(
            node.rpc_url,
            "0x" + parties.admin.key.hex(),
            scratch / "deployment.json",
            DeployParams(coordinator=parties.coordinator.address, challenge_window=3_600),
        )
        market = connect(node.rpc_url, scratch / "deployment.json", parties.admin)
        fund(market, parties, DemoConfig())
        for miner in parties.miners:
            register_with_cli(node.rpc_url, scratch / "deployment.json", miner, DemoConfig())
        measure(node, market, parties, BASELINE)  # the first task pays for never-written slots; not counted
        results = {}
        for n in REQUEST_COUNTS:
            snapshot = node.w3.provider.make_request("evm_snapshot", [])["result"]  # type: ignore[arg-type]
            results[n] = measure(node, market, parties, n)
            node.w3.provider.make_request("evm_revert", [snapshot])  # type: ignore[arg-type]
        return results


def report(results: dict[int, dict[str, tuple[int, int]]]) -> Table:
    base = sum(execution for execution, _ in results[BASELINE].values())
    table = report_table(
        title="Execution gas per task vs. requests in the batch (baseline: 10 requests, same run)",
        columns=("requests", *STEPS, "execution", "ratio", "+ intrinsic"),
    )
    for n, gas in results.items():
        execution = sum(e for e, _ in gas.values())
        intrinsic = sum(i for _, i in gas.values())
        table.add_row(
            f"{n:,}",
            *(f"{gas[s][0]:,}" for s in STEPS),
            f"{execution:,}",
            f"{execution / base:.3f}",
            f"{intrinsic:,}",
        )
    return table


def plot(results: dict[int, dict[str, tuple[int, int]]], path: Path) -> None:
    counts = list(results)
    with figure(path, figsize=(7, 4)) as ax:
        bottom = [0] * len(counts)
        for step in STEPS:
            values = [results[n][step][0] for n in counts]
            ax.bar([f"{n:,}" for n in counts], values, bottom=bottom, label=step)
            bottom = [b + v for b, v in zip(bottom, values, strict=True)]
        ax.set_xlabel("requests in the batch")
        ax.set_ylabel("execution gas per task")
        ax.set_title("Gas per task is independent of batch size")
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))


def main() -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as scratch:
        results = run(Path(scratch))
    publish("gas_per_task", [report(results)], width=120, plot=partial(plot, results))


if __name__ == "__main__":
    main()
