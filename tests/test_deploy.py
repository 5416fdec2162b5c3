"""The Python deploy helper runs the forge script against a real anvil and writes a deployment file whose
addresses hold correctly wired contracts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from eth_account.signers.local import LocalAccount
from web3 import Web3

from client_sdk.chain.anvil import Anvil, free_port
from client_sdk.chain.contracts import Market
from client_sdk.chain.deploy import deploy
from client_sdk.chain.deployment import Deployment
from client_sdk.chain.rpc import open_rpc
from client_sdk.errors import ChainError
from tests.conftest import CHALLENGE_WINDOW, FEE_BPS, MIN_STAKE, UNBONDING_PERIOD, VOTING_PERIOD


def role(name: str) -> bytes:
    return bytes(Web3.keccak(text=name))


def test_deployment_file_describes_the_deployed_market(
    admin_market: Market, deployment_file: Path, accounts: list[LocalAccount]
) -> None:
    raw = json.loads(deployment_file.read_text())
    assert raw["chain_id"] == 31337
    timelock = raw["roles"]["timelock"]
    assert raw["roles"] == {
        "admin": accounts[0].address,
        "coordinator": accounts[1].address,
        "fee_recipient": accounts[1].address,
        "timelock": timelock,
    }
    d = admin_market.deployment
    addresses = (d.token, d.gpu_registry, d.payment_escrow, d.task_registry, d.verifier_registry)
    for address in (*addresses, d.arbitration, d.timelock):
        assert admin_market.w3.eth.get_code(Web3.to_checksum_address(address)), address


def test_roles_and_parameters_are_wired(admin_market: Market, accounts: list[LocalAccount]) -> None:
    d = admin_market.deployment
    registry = admin_market.registry.contract.functions
    escrow = admin_market.escrow.contract.functions
    tasks = admin_market.tasks.contract.functions
    arbitration = admin_market.arbitration.contract.functions
    assert registry.hasRole(role("TASK_MANAGER_ROLE"), d.task_registry).call()
    assert registry.hasRole(role("SLASHER_ROLE"), d.task_registry).call()
    assert not registry.hasRole(role("SLASHER_ROLE"), accounts[1].address).call()
    assert escrow.hasRole(role("TASK_MANAGER_ROLE"), d.task_registry).call()
    assert escrow.hasRole(role("ARBITER_ROLE"), d.arbitration).call()
    assert tasks.hasRole(role("ARBITER_ROLE"), d.arbitration).call()
    assert tasks.hasRole(role("COORDINATOR_ROLE"), accounts[1].address).call()
    assert not tasks.hasRole(role("COORDINATOR_ROLE"), accounts[0].address).call()
    assert admin_market.verifiers.contract.functions.hasRole(role("ARBITER_ROLE"), d.arbitration).call()
    for contract in (registry, escrow, tasks, arbitration, admin_market.verifiers.contract.functions):
        assert contract.hasRole(bytes(32), d.timelock).call(), "the timelock is every contract's admin"
        assert not contract.hasRole(bytes(32), accounts[0].address).call(), "the deployer renounced"
    assert admin_market.timelock.min_delay() == 2 * 86_400

    assert admin_market.token.contract.functions.decimals().call() == 6
    assert admin_market.registry.min_stake() == MIN_STAKE
    assert admin_market.registry.unbonding_period() == UNBONDING_PERIOD
    assert admin_market.tasks.challenge_window() == CHALLENGE_WINDOW
    assert admin_market.tasks.coordinator_fee_bps() == FEE_BPS
    assert admin_market.arbitration.config().voting_period == VOTING_PERIOD


def test_deploying_twice_gives_independent_markets(tmp_path: Path, accounts: list[LocalAccount]) -> None:
    with Anvil(chain_id=4242) as node:
        first = deploy(node.rpc_url, accounts[0].key.to_0x_hex(), tmp_path / "a.json")
        second = deploy(node.rpc_url, accounts[0].key.to_0x_hex(), tmp_path / "b.json")
    assert first.chain_id == second.chain_id == 4242
    assert first.task_registry != second.task_registry
    assert second.block > first.block
    assert Deployment.load(tmp_path / "b.json") == second


def test_deploy_to_unreachable_rpc_is_a_clear_error(tmp_path: Path, accounts: list[LocalAccount]) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(ChainError, match=f"^cannot reach the RPC at {url}: "):
        deploy(url, accounts[0].key.to_0x_hex(), tmp_path / "d.json")
    assert not (tmp_path / "d.json").exists()


def test_missing_and_malformed_deployment_files(tmp_path: Path) -> None:
    with pytest.raises(ChainError, match=r"^no deployment file at .*nope\.json: deploy the contracts first"):
        Deployment.load(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"chain_id": 1}')
    with pytest.raises(ChainError, match=r"^deployment file .*bad\.json is malformed: 'contracts'$"):
        Deployment.load(bad)


def test_anvil_launcher_stops_cleanly() -> None:
    node = Anvil(chain_id=777).start()
    assert node.w3.eth.chain_id == 777
    url = node.rpc_url
    node.stop()
    with pytest.raises(ChainError, match="cannot reach the RPC"):
        open_rpc(url)
