"""The `coordinator`, `market` and `arbitration` commands that exist so far, against real anvil."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import typer
from eth_account import Account
from eth_account.signers.local import LocalAccount
from typer.testing import CliRunner

from client_sdk.chain.anvil import Anvil
from client_sdk.chain.contracts import Market
from client_sdk.chain.deployment import Deployment
from client_sdk.cli.arbitration import app as arbitration_app
from client_sdk.cli.market import app as market_app
from client_sdk.protocol.model_identity import KNOWN_MODELS, model_id_of
from client_sdk.protocol.task import TaskStatus
from coordinator.cli.app import app as coordinator_app
from demo.lifecycle import MODEL, DemoConfig, create_task
from miner.cli.app import app as miner_app
from miner.cli.verify import ensure_registered
from tests.helpers import assigned_task, committed_task


@pytest.mark.parametrize("app", [market_app, miner_app, coordinator_app, arbitration_app])
def test_help_explains_every_command(app: typer.Typer) -> None:
    result = CliRunner().invoke(app, ["--help"])
    assert result.exit_code == 0
    assert "Usage" in result.stdout


def test_coordinator_deploy_writes_a_deployment_file(tmp_path: Path, accounts: list[LocalAccount]) -> None:
    out = tmp_path / "deployment.json"
    with Anvil(chain_id=5151) as node:
        result = CliRunner().invoke(
            coordinator_app,
            ["deploy", "--rpc-url", node.rpc_url, "--out", str(out), "--coordinator", accounts[1].address],
            env={"BATCHMARKET_PRIVATE_KEY": accounts[0].key.to_0x_hex()},
        )
        assert result.exit_code == 0, result.output
        deployment = Deployment.load(out)
        assert deployment.chain_id == 5151
        assert deployment.coordinator == accounts[1].address
        assert deployment.admin == accounts[0].address
        assert node.w3.eth.get_code(node.w3.to_checksum_address(deployment.arbitration))


def test_market_task_shows_the_on_chain_record(
    admin_market: Market, chain: Anvil, deployment_file: Path, accounts: list[LocalAccount]
) -> None:
    task_id = assigned_task(admin_market, accounts[1], accounts[2], [accounts[3]])
    args = ["--rpc-url", chain.rpc_url, "--deployment", str(deployment_file)]
    result = CliRunner().invoke(market_app, ["task", str(task_id), *args, "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["status"] == "assigned"
    assert report["owner"] == accounts[2].address
    assert report["max_price"] == "50.000000"
    assert report["requests"] == 8
    assert report["miners"] == [accounts[3].address]
    smollm2 = "HuggingFaceTB/SmolLM2-135M-Instruct"  # the demo task's model, by its known hash
    assert report["model"] == f"{smollm2} ({KNOWN_MODELS[smollm2]})"

    missing = CliRunner().invoke(market_app, ["task", "999", *args])
    assert missing.exit_code == 1
    assert missing.stderr.strip() == "error: there is no task 999"


def test_market_reclaim_refunds_an_assigned_task_past_its_deadline_and_nothing_else(
    admin_market: Market, chain: Anvil, deployment_file: Path, accounts: list[LocalAccount]
) -> None:
    """An owner whose coordinator never committed gets the whole escrow back, and the miners their stake,
    once the deadline has passed; before that, and for a task that is no longer open, it explains why not."""
    user, miner = accounts[2], accounts[3]
    task_id = assigned_task(admin_market, accounts[1], user, [miner])
    task = admin_market.tasks.get_task(task_id)
    env = {"BATCHMARKET_PRIVATE_KEY": accounts[8].key.to_0x_hex()}  # anyone may call it
    args = ["reclaim", str(task_id), "--rpc-url", chain.rpc_url, "--deployment", str(deployment_file)]
    early = CliRunner().invoke(market_app, args, env=env, terminal_width=200)
    shown = " ".join(early.stderr.split())
    assert early.exit_code == 1 and f"task {task_id} can be reclaimed after its deadline, in " in shown
    before = admin_market.escrow.balance_of(user.address)
    chain.advance_time(task.deadline - admin_market.chain_time() + 1)
    done = CliRunner().invoke(market_app, args, env=env, terminal_width=200)
    assert done.exit_code == 0, done.output
    assert " ".join(done.stdout.split()) == (  # the console wraps at 80 columns
        f"task {task_id} expired: 50.000000 mUSD back to its owner {user.address} "
        "(`market withdraw` takes it out)"
    )
    assert admin_market.escrow.balance_of(user.address) == before + task.max_price
    stake = admin_market.registry.stake_of(miner.address)
    assert stake.locked == 0 and admin_market.escrow.balance_of(miner.address) == 0
    again = CliRunner().invoke(market_app, args, env=env, terminal_width=200)
    refused = " ".join(again.stderr.split())
    assert again.exit_code == 1 and refused == (
        f"error: task {task_id} is expired: its escrow went back to its owner {user.address} already "
        "(`market withdraw` takes it out)"
    )


def test_market_withdraw_pays_out_a_cancelled_escrow(
    admin_market: Market, chain: Anvil, deployment_file: Path, accounts: list[LocalAccount]
) -> None:
    user = accounts[2]
    env = {
        "BATCHMARKET_PRIVATE_KEY": user.key.to_0x_hex(),
        "BATCHMARKET_RPC_URL": chain.rpc_url,
        "BATCHMARKET_DEPLOYMENT": str(deployment_file),
    }
    nothing = CliRunner().invoke(market_app, ["withdraw"], env=env)
    assert nothing.exit_code == 1
    assert nothing.stderr.strip() == "error: nothing to withdraw"

    admin_market.token.mint(user.address, 50 * 10**6)
    created = create_task(admin_market.as_account(user), DemoConfig())
    admin_market.as_account(user).tasks.cancel_task(created)
    result = CliRunner().invoke(market_app, ["withdraw"], env=env)
    assert result.exit_code == 0, result.output
    assert "withdrew 50.000000 mUSD" in result.stdout
    assert admin_market.token.balance_of(user.address) == 50 * 10**6


def test_arbitration_dispute_show_unknown(chain: Anvil, deployment_file: Path) -> None:
    args = ["dispute", "show", "1", "--rpc-url", chain.rpc_url, "--deployment", str(deployment_file)]
    result = CliRunner().invoke(arbitration_app, args)
    assert result.exit_code == 1
    assert result.stderr.strip() == "error: there is no dispute 1"


def test_market_faucet_mints_test_tokens_and_gas_on_a_devnet(
    admin_market: Market, chain: Anvil, deployment_file: Path, accounts: list[LocalAccount]
) -> None:
    env = {"BATCHMARKET_RPC_URL": chain.rpc_url, "BATCHMARKET_DEPLOYMENT": str(deployment_file)}
    newcomer = Account.create().address
    admin = {**env, "BATCHMARKET_PRIVATE_KEY": accounts[0].key.to_0x_hex()}
    result = CliRunner().invoke(market_app, ["faucet", "1000", "--to", newcomer], env=admin)
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == f"minted 1000.000000 mUSD to {newcomer}"
    assert admin_market.token.balance_of(newcomer) == 1_000 * 10**6
    assert chain.w3.eth.get_balance(newcomer) == 10**20  # gas money on anvil

    user = {**env, "BATCHMARKET_PRIVATE_KEY": accounts[2].key.to_0x_hex()}
    refused = CliRunner().invoke(market_app, ["faucet", "5"], env=user)
    assert refused.exit_code == 1
    assert refused.stderr.strip() == (
        f"error: {accounts[2].address} cannot mint test tokens: run the faucet with the devnet deployer's "
        "key (the token's minter)"
    )
    bad = CliRunner().invoke(market_app, ["faucet", "5", "--to", "0x12"], env=admin)
    assert bad.exit_code == 1 and bad.stderr.strip() == "error: '0x12' is not an address"


def test_arbitration_line_challenge_show_and_settle(
    admin_market: Market, chain: Anvil, deployment_file: Path, accounts: list[LocalAccount]
) -> None:
    """The owner challenges two lines of its committed task; a signing miner answers one; the other is settled
    once its answer period is over: the owner gets its escrow back and both miners' stake locks. Settling
    early, or an answered line, or challenging another's task, is refused in one line."""
    coordinator, user, miners = accounts[1], accounts[2], [accounts[3], accounts[4]]
    done = committed_task(admin_market, coordinator, user, miners)
    task_id, config = done.task_id, DemoConfig()
    chain_args = ["--rpc-url", chain.rpc_url, "--deployment", str(deployment_file)]
    owner = {"BATCHMARKET_PRIVATE_KEY": user.key.to_0x_hex()}
    stranger = {"BATCHMARKET_PRIVATE_KEY": accounts[8].key.to_0x_hex()}

    def run(args: list[str], env: dict[str, str]) -> Any:
        return CliRunner().invoke(arbitration_app, ["line", *args, *chain_args], env=env, terminal_width=200)

    other = run(["challenge", str(task_id), "0"], stranger)
    assert other.exit_code == 1
    assert (
        other.stderr.strip()
        == f"error: task {task_id} is {user.address}'s: only its owner challenges its lines"
    )
    challenged = run(["challenge", str(task_id), "0", "1"], owner)
    assert challenged.exit_code == 0, challenged.output
    assert f"task {task_id} line 1: challenged; to be answered by " in challenged.stdout
    assert admin_market.as_account(miners[0]).challenges.answer_from(done.trees, [0]) == {0: None}
    early = run(["settle", str(task_id), "1"], stranger)
    assert early.exit_code == 1 and f"task {task_id} line 1 may still be answered until " in early.stderr
    shown = run(["show", str(task_id), "--json"], stranger)
    assert [(c["line"], c["status"]) for c in json.loads(shown.stdout)] == [(0, "answered"), (1, "open")]

    chain.advance_time(admin_market.challenges.answer_period() + 1)
    answered = run(["settle", str(task_id), "0"], stranger)
    assert answered.exit_code == 1 and "line 0 is not waiting for an answer: answered" in answered.stderr
    before = admin_market.escrow.balance_of(user.address)
    pool = admin_market.escrow.audit_pool()
    settled = run(["settle", str(task_id), "1"], stranger)
    assert settled.exit_code == 0, settled.output
    assert admin_market.escrow.balance_of(user.address) == before + config.max_price  # the refund, no lock
    assert admin_market.escrow.audit_pool() == pool + 2 * config.stake_lock  # the two signers' locks
    for miner in miners:
        stake = admin_market.registry.stake_of(miner.address)
        assert (stake.locked, stake.free) == (0, config.miner_stake - config.stake_lock)
    assert admin_market.tasks.get_task(task_id).status == TaskStatus.FINALIZED


def test_the_installed_arbitration_command_has_every_command_of_the_sdks() -> None:
    """`arbitration` (miner.cli.arbitration) is the SDK's arbitration app plus `verify`: none left out."""
    from client_sdk.cli.arbitration import app as sdk_app
    from miner.cli.arbitration import app as installed

    def names(app: typer.Typer) -> set[str]:
        return {c.name or "" for c in app.registered_commands} | {g.name or "" for g in app.registered_groups}

    assert names(installed) == names(sdk_app) | {"verify"}


def test_a_verifier_joins_the_pool_of_each_model_it_runs_and_leaves_one_through_the_cli(
    admin_market: Market, chain: Anvil, deployment_file: Path, accounts: list[LocalAccount]
) -> None:
    """`arbitration verify` registers its wallet for the model it runs, and a verifier of another model joins
    that one's pool too; `arbitration status` names the models, `arbitration leave-model` leaves one, once."""
    verifier = accounts[7]
    first, second = model_id_of(MODEL), bytes(31) + b"\x09"
    admin_market.token.mint(verifier.address, admin_market.verifiers.min_stake())
    mine = admin_market.as_account(verifier)
    ensure_registered(mine, None, first)
    ensure_registered(mine, None, second)  # already a verifier: it joins the second model's pool
    ensure_registered(mine, None, second)  # nothing left to do
    assert mine.verifiers.models_of(verifier.address) == [first, second]
    assert admin_market.verifiers.total_weight(second) == 1

    env = {"BATCHMARKET_PRIVATE_KEY": verifier.key.to_0x_hex()}
    chain_args = ["--rpc-url", chain.rpc_url, "--deployment", str(deployment_file)]

    def run(*args: str) -> Any:
        return CliRunner().invoke(arbitration_app, [*args, *chain_args], env=env, terminal_width=200)

    status = run("status", "--json")
    assert status.exit_code == 0, status.output
    assert json.loads(status.stdout)["models"] == ["0x" + first.hex(), "0x" + second.hex()]
    left = run("leave-model", "0x" + second.hex())
    assert left.exit_code == 0, left.output
    assert f"left the jury pool of 0x{second.hex()}" in left.stdout
    assert admin_market.verifiers.total_weight(second) == 0
    again = run("leave-model", "0x" + second.hex())
    assert again.exit_code == 1
    assert again.stderr.strip() == f"error: {verifier.address} does not judge 0x{second.hex()}"
    assert mine.verifiers.models_of(verifier.address) == [first]
