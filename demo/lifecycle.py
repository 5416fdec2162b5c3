"""One task through the whole on-chain lifecycle on a fresh anvil devnet, inference simulated: the money flow
alone, which the gas benchmark and the contract integration tests use (`make demo` runs the real thing:
demo/batch_demo.py).

start anvil -> deploy -> fund a user and two miners -> miners register and stake with the `miner` CLI ->
user creates and funds a task -> coordinator assigns it -> [inference, simulated for now] -> every miner signs
the results root (EIP-712) -> coordinator commits -> challenge window -> finalize -> everyone withdraws.

Each step is its own function so later issues can swap the simulated middle for real inference.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from eth_account.signers.local import LocalAccount
from eth_utils.crypto import keccak
from rich.console import Console
from rich.table import Table

from client_sdk.chain.anvil import Anvil, dev_accounts
from client_sdk.chain.contracts import Market, connect
from client_sdk.chain.deploy import DeployParams, deploy
from client_sdk.eip712 import Acceptance, ResultCommitment, sign_acceptance, sign_commitment
from client_sdk.protocol.model_identity import model_id_of
from client_sdk.protocol.task import TaskPrices
from client_sdk.results import ResultLeaf, ResultTrees
from client_sdk.units import format_amount

UNIT = 10**6  # one token in base units
MODEL = "HuggingFaceTB/SmolLM2-135M-Instruct"  # named by its known hash on-chain


@dataclass(frozen=True)
class DemoConfig:
    """Everything the demo's numbers follow from."""

    user_funds: int = 1_000 * UNIT
    miner_funds: int = 500 * UNIT
    miner_stake: int = 200 * UNIT
    min_stake: int = 100 * UNIT
    max_price: int = 50 * UNIT
    stake_lock: int = 50 * UNIT
    price_per_million_tokens: int = 20 * UNIT
    requests: int = 8
    input_tokens_per_request: int = 50_000
    output_tokens_per_request: int = 75_000
    layer_share_percent: tuple[int, int] = (60, 40)  # miner A serves 60% of the layers, miner B 40%
    coordinator_fee_bps: int = 500
    challenge_window: int = 3_600


@dataclass(frozen=True)
class BalanceRow:
    party: str
    address: str
    wallet_before: int
    wallet_after: int
    stake_before: int
    stake_after: int


@dataclass(frozen=True)
class DemoReport:
    task_id: int
    payment: int
    fee: int
    refund: int
    miner_amounts: tuple[int, ...]
    rows: tuple[BalanceRow, ...]


@dataclass(frozen=True)
class Parties:
    admin: LocalAccount
    coordinator: LocalAccount
    user: LocalAccount
    miners: tuple[LocalAccount, LocalAccount]


def run_demo(config: DemoConfig = DemoConfig(), log: Console | None = None) -> DemoReport:
    """Runs the lifecycle on its own anvil and returns every balance before and after."""
    say = (log or Console(quiet=True)).print
    accounts = dev_accounts()
    parties = Parties(accounts[0], accounts[1], accounts[2], (accounts[3], accounts[4]))
    with Anvil() as node, tempfile.TemporaryDirectory() as scratch:
        deployment_file = Path(scratch) / "deployment.json"
        say(f"anvil on {node.rpc_url}; deploying the contracts")
        deploy(
            node.rpc_url,
            "0x" + parties.admin.key.hex(),
            deployment_file,
            DeployParams(
                coordinator=parties.coordinator.address,
                min_stake=config.min_stake,
                challenge_window=config.challenge_window,
                coordinator_fee_bps=config.coordinator_fee_bps,
            ),
        )
        market = connect(node.rpc_url, deployment_file, parties.admin)
        fund(market, parties, config)
        before = snapshot(market, parties)
        say("miners register and stake with the `miner` CLI")
        for miner in parties.miners:
            register_with_cli(node.rpc_url, deployment_file, miner, config)
        task_id = create_task(market.as_account(parties.user), config)
        say(f"user created task {task_id} with {format_amount(config.max_price)} in escrow")
        coordinator = market.as_account(parties.coordinator)
        miner_addresses = [m.address for m in parties.miners]
        acceptances = accept_task(market, task_id, list(parties.miners), config.stake_lock)
        coordinator.tasks.assign_task(task_id, miner_addresses, config.stake_lock, acceptances)
        leaves = simulate_inference(task_id, config, miner_addresses)
        commitment = price_results(market, task_id, leaves, miner_addresses, config)
        signatures = [
            sign_commitment(m, commitment, m.address, node.w3.eth.chain_id, market.deployment.task_registry)
            for m in parties.miners
        ]
        coordinator.tasks.commit_results(commitment, signatures)
        say(f"results root committed with {len(signatures)} miner signatures; challenge window runs")
        node.advance_time(config.challenge_window)
        market.as_account(parties.user).tasks.finalize_task(task_id)
        withdraw_all(node.rpc_url, deployment_file, market, parties)
        after = snapshot(market, parties)
        task = market.tasks.get_task(task_id)
    rows = tuple(
        BalanceRow(name, address, b[0], a[0], b[1], a[1])
        for (name, address, b), (_, _, a) in zip(before, after, strict=True)
    )
    return DemoReport(
        task_id=task_id,
        payment=task.payment,
        fee=task.fee,
        refund=task.max_price - task.payment,
        miner_amounts=commitment.miner_amounts,
        rows=rows,
    )


def fund(market: Market, parties: Parties, config: DemoConfig) -> None:
    """The admin mints mock dollars to the user and the miners (devnet faucet)."""
    market.token.mint(parties.user.address, config.user_funds)
    for miner in parties.miners:
        market.token.mint(miner.address, config.miner_funds)


def register_with_cli(rpc_url: str, deployment_file: Path, miner: LocalAccount, config: DemoConfig) -> None:
    """Runs `miner register` exactly as an operator would, key in the environment."""
    # fmt: off
    command = [
        sys.executable, "-m", "miner", "register",
        "--stake", format_amount(config.miner_stake),
        "--gpu", "RTX4090-24GB", "--vram-gb", "24", "--region", "eu-west-1",
        "--endpoint", f"tcp://miner-{miner.address[2:8].lower()}.example:5555",
        "--model", MODEL,  # a known model's name; a checkpoint directory would go with --model-dir
    ]
    # fmt: on
    subprocess.run(command, env=cli_env(rpc_url, deployment_file, miner), check=True, capture_output=True)


def cli_env(rpc_url: str, deployment_file: Path, account: LocalAccount) -> dict[str, str]:
    """The environment a CLI user sets: chain, deployment and key (never a command-line argument)."""
    return os.environ | {
        "BATCHMARKET_PRIVATE_KEY": "0x" + account.key.hex(),
        "BATCHMARKET_RPC_URL": rpc_url,
        "BATCHMARKET_DEPLOYMENT": str(deployment_file),
    }


def create_task(user_market: Market, config: DemoConfig, input_root: bytes | None = None) -> int:
    """The user approves the escrow and creates the task of `config.requests` requests with its maximum price
    (over a stand-in input file unless `input_root` is given)."""
    user_market.token.approve(user_market.escrow.address, config.max_price)
    now = user_market.chain_time()
    return user_market.tasks.create_task(
        model_id=model_id_of(MODEL),
        input_root=input_root or keccak(text="demo input file"),
        request_count=config.requests,
        params_hash=keccak(text='{"temperature": 0}'),
        max_price=config.max_price,
        deadline=now + 86_400,
        prices=TaskPrices(config.price_per_million_tokens, config.price_per_million_tokens),
    )


def accept_task(
    market: Market, task_id: int, miners: list[LocalAccount], stake_lock: int
) -> list[Acceptance]:
    """Each miner's signed consent to a lock of `stake_lock` for the task, valid for an hour of chain time."""
    expiry = market.chain_time() + 3_600
    chain_id, registry = market.w3.eth.chain_id, market.deployment.task_registry
    return [sign_acceptance(m, task_id, m.address, stake_lock, expiry, chain_id, registry) for m in miners]


def simulate_inference(task_id: int, config: DemoConfig, pipeline: Sequence[str]) -> list[ResultLeaf]:
    """Stands in for the miners' pipeline until the engine lands: one result leaf per request."""
    return [
        ResultLeaf(
            task_id=task_id,
            request_index=i,
            custom_id_hash=keccak(text=f"request-{i}"),
            input_hash=keccak(text=f"prompt {i}"),
            output_hash=keccak(text=f"completion {i}"),
            input_tokens=config.input_tokens_per_request,
            output_tokens=config.output_tokens_per_request,
            pipeline=tuple(pipeline),
        )
        for i in range(config.requests)
    ]


def price_results(
    market: Market, task_id: int, leaves: list[ResultLeaf], miners: Sequence[str], config: DemoConfig
) -> ResultCommitment:
    """Usage-based payment capped at the max price; fee off the top; the rest split by layers served; the
    results root and each of `miners`' served root over `leaves`."""
    trees = ResultTrees(leaves, miners)
    input_tokens, output_tokens = trees.usage.input_tokens, trees.usage.output_tokens
    payment = market.tasks.prices_of(task_id).cost(input_tokens, output_tokens, config.max_price)
    fee = payment * market.tasks.coordinator_fee_bps() // 10_000
    to_miners = payment - fee
    first = to_miners * config.layer_share_percent[0] // 100
    return ResultCommitment(
        task_id=task_id,
        results_root=trees.root,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        payment=payment,
        miner_amounts=(first, to_miners - first),
        served_roots=trees.served_roots(),
        miners=tuple(miners),
        request_count=len(leaves),
    )


def withdraw_all(rpc_url: str, deployment_file: Path, market: Market, parties: Parties) -> None:
    """Miners withdraw with their CLI; the user and the coordinator through the SDK."""
    for miner in parties.miners:
        env = cli_env(rpc_url, deployment_file, miner)
        subprocess.run([sys.executable, "-m", "miner", "withdraw"], env=env, check=True, capture_output=True)
    market.as_account(parties.user).escrow.withdraw()
    market.as_account(parties.coordinator).escrow.withdraw()


def snapshot(market: Market, parties: Parties) -> list[tuple[str, str, tuple[int, int]]]:
    """(party, address, (wallet, total stake)) for everyone whose money moves."""
    named = [("user", parties.user), ("miner A", parties.miners[0]), ("miner B", parties.miners[1])]
    named.append(("coordinator", parties.coordinator))
    return [
        (
            name,
            acct.address,
            (market.token.balance_of(acct.address), market.registry.stake_of(acct.address).total),
        )
        for name, acct in named
    ]


def balance_table(report: DemoReport) -> Table:
    table = Table(title=f"Balances around task {report.task_id} (mUSD)")
    for column in ("party", "wallet before", "wallet after", "stake before", "stake after", "net change"):
        table.add_column(column, justify="left" if column == "party" else "right")
    for row in report.rows:
        net = (row.wallet_after + row.stake_after) - (row.wallet_before + row.stake_before)
        table.add_row(
            row.party,
            format_amount(row.wallet_before),
            format_amount(row.wallet_after),
            format_amount(row.stake_before),
            format_amount(row.stake_after),
            ("+" if net > 0 else "") + format_amount(net),
        )
    return table
