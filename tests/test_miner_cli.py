"""`miner register / status / unstake / withdraw` against a real anvil deployment, including the one-line
error for each bad input the CLI promises to explain."""

from __future__ import annotations

import dataclasses
import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import typer
from eth_account import Account
from eth_account.signers.local import LocalAccount
from typer.testing import CliRunner, Result

from client_sdk.chain.anvil import Anvil, free_port
from client_sdk.chain.contracts import Market
from client_sdk.keys import write_keystore
from client_sdk.protocol.model_identity import KNOWN_MODELS, model_hash
from miner.cli.app import app
from miner.cli.arbitration import app as arbitration_app
from miner.tiny_checkpoint import build_checkpoint
from miner.transport.security import LinkKeys
from tests.conftest import MIN_STAKE, UNBONDING_PERIOD
from tests.helpers import assigned_task, usage_error

REGISTER = [
    "register", "--gpu", "RTX4090-24GB", "--vram-gb", "24", "--region", "eu-west-1",
    "--endpoint", "tcp://10.0.0.7:5555",
    "--model", "HuggingFaceTB/SmolLM2-135M-Instruct", "--model", "0x" + "ab" * 32,
]  # fmt: skip

Invoke = Callable[..., Result]


def utc(timestamp: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(timestamp))


def register_with(option: str, value: str) -> list[str]:
    """REGISTER with the (first) value of `option` replaced."""
    args = list(REGISTER)
    args[args.index(option) + 1] = value
    return args


@pytest.fixture
def miner(accounts: list[LocalAccount]) -> LocalAccount:
    return accounts[3]


@pytest.fixture
def run(chain: Anvil, deployment_file: Path, miner: LocalAccount) -> Invoke:
    """Invokes the miner CLI in-process as `miner` (its key in the environment) against the test chain."""

    def invoke(*args: str, key: str | None = miner.key.to_0x_hex(), **env: str) -> Result:
        environment = {
            "BATCHMARKET_RPC_URL": chain.rpc_url,
            "BATCHMARKET_DEPLOYMENT": str(deployment_file),
            "BATCHMARKET_PRIVATE_KEY": key,
            "BATCHMARKET_KEYSTORE_PASSWORD": None,
            "BATCHMARKET_SIGNER_KEYSTORE": None,
            "BATCHMARKET_SIGNER_KEYSTORE_PASSWORD": None,
            "BATCHMARKET_SIGNER_PRIVATE_KEY": None,
            **env,
        }
        return CliRunner().invoke(app, list(args), env=environment)

    return invoke


def one_line_error(result: Result) -> str:
    assert result.exit_code == 1, result.output
    text = result.stderr.strip()
    assert "\n" not in text and "Traceback" not in text, text
    assert text.startswith("error: "), text
    return text


def test_register_stakes_and_status_reports_it(
    admin_market: Market, run: Invoke, miner: LocalAccount
) -> None:
    admin_market.token.mint(miner.address, 150 * 10**6)
    result = run(*REGISTER, "--stake", "120.5", "--gpu-count", "2")
    assert result.exit_code == 0, result.output
    assert f"registered {miner.address} with a stake of 120.500000 mUSD" in " ".join(result.stdout.split())

    stake = admin_market.registry.stake_of(miner.address)
    assert (stake.free, stake.locked, stake.unbonding) == (120_500_000, 0, 0)
    assert admin_market.token.balance_of(miner.address) == 29_500_000
    assert admin_market.token.balance_of(admin_market.registry.address) == 120_500_000

    status = run("status", "--json")
    assert status.exit_code == 0, status.output
    report = json.loads(status.stdout)
    assert report["gpu"] == "RTX4090-24GB"
    assert report["gpu_count"] == 2
    assert report["region"] == "eu-west-1"
    smollm2 = KNOWN_MODELS["HuggingFaceTB/SmolLM2-135M-Instruct"]
    assert report["models"] == [f"HuggingFaceTB/SmolLM2-135M-Instruct ({smollm2})", "0x" + "ab" * 32]
    assert report["stake_free"] == "120.500000"
    assert report["wallet_balance"] == "29.500000"


def test_stake_adds_to_a_registered_miners_free_stake(
    admin_market: Market, run: Invoke, miner: LocalAccount
) -> None:
    assert (
        one_line_error(run("stake", "add", "10"))
        == f"error: {miner.address} is not registered; run `miner register` first"
    )
    admin_market.token.mint(miner.address, 150 * 10**6)
    assert run(*REGISTER, "--stake", "100").exit_code == 0
    added = run("stake", "add", "12.5")
    assert added.exit_code == 0, added.output
    assert added.stdout.strip() == "staked 12.500000 mUSD more; 112.500000 mUSD of the stake is free"
    stake = admin_market.registry.stake_of(miner.address)
    assert (stake.free, stake.locked, stake.unbonding) == (112_500_000, 0, 0)
    assert admin_market.token.balance_of(miner.address) == 37_500_000
    assert one_line_error(run("stake", "add", "40")) == (
        f"error: insufficient token balance: {miner.address} holds 37.500000 mUSD, asked to stake "
        "40.000000 mUSD"
    )
    assert one_line_error(run("stake", "add", "0")) == "error: the amount to stake must be more than 0"
    shown = run("stake", "show", "--json")
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout) == {
        "free": "112.500000",
        "locked": "0.000000",
        "unbonding": "0.000000",
        "unbonded_at": None,
        "minimum": f"{MIN_STAKE / 10**6:.6f}",
        "token": "mUSD",
    }


def test_update_changes_the_registered_endpoint_and_refuses_one_no_stage_can_dial(
    admin_market: Market, run: Invoke, miner: LocalAccount
) -> None:
    assert (
        one_line_error(run("update", "--endpoint", "tcp://10.0.0.9:5555"))
        == f"error: {miner.address} is not registered; run `miner register` first"
    )
    admin_market.token.mint(miner.address, 150 * 10**6)
    assert run(*REGISTER, "--stake", "100").exit_code == 0
    before = admin_market.registry.profile_of(miner.address)
    refused = one_line_error(run("update", "--endpoint", "10.0.0.9:5555"))
    assert "is not an endpoint a stage can dial: use tcp://HOST:PORT" in refused
    assert admin_market.registry.profile_of(miner.address) == before

    changed = run("update", "--endpoint", "tcp://10.0.0.9:5555")
    assert changed.exit_code == 0, changed.output
    assert " ".join(changed.stdout.split()) == (  # the console wraps at 80 columns
        f"endpoint changed from {before.endpoint} to tcp://10.0.0.9:5555; restart `miner serve` to use it"
    )
    assert admin_market.registry.profile_of(miner.address) == dataclasses.replace(
        before, endpoint="tcp://10.0.0.9:5555"
    )
    again = run("update", "--endpoint", "tcp://10.0.0.9:5555")
    assert " ".join(again.stdout.split()) == "the endpoint is already tcp://10.0.0.9:5555; nothing to change"


def test_already_registered(admin_market: Market, run: Invoke, miner: LocalAccount) -> None:
    admin_market.token.mint(miner.address, 300 * 10**6)
    assert run(*REGISTER, "--stake", "100").exit_code == 0
    error = one_line_error(run(*REGISTER, "--stake", "100"))
    assert error == f"error: {miner.address} is already registered; use `miner status` to see it"


def test_stake_below_minimum(admin_market: Market, run: Invoke, miner: LocalAccount) -> None:
    admin_market.token.mint(miner.address, 300 * 10**6)
    error = one_line_error(run(*REGISTER, "--stake", "99.999999"))
    assert error == f"error: stake 99.999999 mUSD is below the minimum stake of {MIN_STAKE / 10**6:.6f} mUSD"
    assert not admin_market.registry.is_registered(miner.address)


def test_insufficient_balance(admin_market: Market, run: Invoke, miner: LocalAccount) -> None:
    admin_market.token.mint(miner.address, 40 * 10**6)
    error = one_line_error(run(*REGISTER, "--stake", "100"))
    assert (
        error == f"error: insufficient token balance: {miner.address} holds 40.000000 mUSD, the stake is "
        "100.000000 mUSD"
    )


def test_insufficient_allowance(admin_market: Market, run: Invoke, miner: LocalAccount) -> None:
    admin_market.token.mint(miner.address, 200 * 10**6)
    admin_market.as_account(miner).token.approve(admin_market.registry.address, 10 * 10**6)
    error = one_line_error(run(*REGISTER, "--stake", "100", "--no-approve"))
    assert error == (
        "error: insufficient allowance: the registry may take 10.000000 mUSD, the stake is 100.000000 mUSD; "
        "approve it or drop --no-approve"
    )
    # with approval handled by the CLI the same registration goes through
    assert run(*REGISTER, "--stake", "100").exit_code == 0
    assert admin_market.registry.stake_of(miner.address).free == 100 * 10**6


def test_wrong_chain_id(run: Invoke, deployment_file: Path, tmp_path: Path) -> None:
    other = tmp_path / "mainnet.json"
    other.write_text(deployment_file.read_text().replace('"chain_id": 31337', '"chain_id": 1'))
    result = run(*REGISTER, "--stake", "100", "--deployment", str(other))
    assert one_line_error(result).startswith("error: wrong chain: the RPC at http://127.0.0.1:")
    assert f"is chain 31337, but {other} is a deployment on chain 1" in result.stderr


def test_rpc_unreachable(run: Invoke) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    error = one_line_error(run(*REGISTER, "--stake", "100", "--rpc-url", url))
    assert error.startswith(f"error: cannot reach the RPC at {url}: ")


def test_no_deployment_file(run: Invoke, tmp_path: Path) -> None:
    missing = tmp_path / "deployment.json"
    error = one_line_error(run(*REGISTER, "--stake", "100", "--deployment", str(missing)))
    assert error.startswith(f"error: no deployment file at {missing}: deploy the contracts first")


def test_no_key(run: Invoke) -> None:
    error = one_line_error(run(*REGISTER, "--stake", "100", key=None))
    assert error == "error: no key: pass --keystore FILE or set BATCHMARKET_PRIVATE_KEY"


def test_bad_amount_is_rejected_before_any_transaction(run: Invoke) -> None:
    assert one_line_error(run(*REGISTER, "--stake", "ten")) == "error: not a token amount: 'ten'"


@pytest.mark.parametrize(
    ("endpoint", "reason"),
    [
        ("203.0.113.7:5555", "is not an endpoint a stage can dial: use tcp://HOST:PORT"),
        ("http://miner.example:5555", "is not an endpoint a stage can dial"),
        ("tcp://miner.example:70000", "port 70000 of 'tcp://miner.example:70000' is not from 1 to 65535"),
        ("tcp://0.0.0.0:5555", "is an address to listen on, not to dial"),
        ("tcp://-bad.example:5555", "is not a host name"),
    ],
)
def test_an_endpoint_no_stage_can_dial_is_refused_before_any_transaction(
    run: Invoke, endpoint: str, reason: str
) -> None:
    """It would go on-chain for good; a previous stage could never reach it."""
    assert reason in one_line_error(run(*register_with("--endpoint", endpoint), "--stake", "100"))


@pytest.mark.parametrize(
    ("model", "reason"),
    [
        ("Qwen/Qwen3-0.6B", "'Qwen/Qwen3-0.6B' is neither a 0x model hash nor a known model"),
        ("0x1234", "0x1234 is not a 32-byte model hash"),
        (".", "'.' is a checkpoint directory: pass it with --model-dir"),
    ],
)
def test_a_model_that_is_no_hash_or_known_name_is_refused(run: Invoke, model: str, reason: str) -> None:
    assert reason in one_line_error(run(*register_with("--model", model), "--stake", "100"))


def test_a_checkpoint_directory_registers_its_hash(
    admin_market: Market, run: Invoke, miner: LocalAccount, tmp_path: Path
) -> None:
    checkpoint = build_checkpoint("llama", tmp_path / "llama")
    admin_market.token.mint(miner.address, 150 * 10**6)
    assert one_line_error(run(*REGISTER, "--model-dir", str(tmp_path), "--stake", "100")) == (
        f"error: {tmp_path} is not a checkpoint directory (it has no config.json)"
    )
    assert run(*REGISTER, "--model-dir", str(checkpoint), "--stake", "100").exit_code == 0
    assert admin_market.registry.profile_of(miner.address).model_ids[-1] == model_hash(checkpoint)


def test_serving_a_checkpoint_other_than_the_registered_model_is_refused(
    admin_market: Market, run: Invoke, miner: LocalAccount, tmp_path: Path
) -> None:
    """Registered for SmolLM2 (by its known hash), the miner is given other weights: `miner serve` refuses
    to start, in one line naming both models, before it joins any coordinator."""
    admin_market.token.mint(miner.address, 150 * 10**6)
    assert run(*REGISTER, "--stake", "100").exit_code == 0
    other = build_checkpoint("llama", tmp_path / "other")
    (other / "tokenizer.json").write_text("{}")  # never read: the refusal comes first
    args = ["serve", "--coordinator", "http://127.0.0.1:9", "--model", "HuggingFaceTB/SmolLM2-135M-Instruct"]
    error = one_line_error(run(*args, "--model-dir", str(other)))
    assert error == (
        f"error: the checkpoint in {other} is the model 0x{model_hash(other).hex()}, which {miner.address} "
        f"did not register (registered: HuggingFaceTB/SmolLM2-135M-Instruct "
        f"({KNOWN_MODELS['HuggingFaceTB/SmolLM2-135M-Instruct']}), 0x{'ab' * 32})"
    )


def test_a_node_signs_with_the_registered_signer_only_its_own_or_a_separate_key(
    admin_market: Market, run: Invoke, miner: LocalAccount, tmp_path: Path
) -> None:
    """A node consents and signs with the registered signer: its account's key, or a separate one from
    `--signer-keystore` (made by `miner signer new`). Any other would never be assigned a task, so `miner
    serve` refuses to start, in one line that names the key and the fix; with the registered signer's
    keystore it gets past the check (to the next one: these weights are not the registered model)."""
    admin_market.token.mint(miner.address, 150 * 10**6)
    other_signer = Account.create().address
    assert run(*REGISTER, "--stake", "100", "--signer", other_signer).exit_code == 0
    model_dir = build_checkpoint("llama", tmp_path / "model")
    serve = ["serve", "--coordinator", "http://127.0.0.1:9", "--model", "HuggingFaceTB/SmolLM2-135M-Instruct"]
    serve += ["--model-dir", str(model_dir)]

    def refusal(signer: str) -> str:
        return (
            f"error: this node signs with {signer}, but the registered signer is "
            f"{admin_market.registry.profile_of(miner.address).signer}: run `miner signer set {signer}`, or "
            "give the registered signer's key with --signer-keystore"
        )

    assert one_line_error(run(*serve)) == refusal(miner.address)

    keystore, password = tmp_path / "signer.json", {"BATCHMARKET_SIGNER_KEYSTORE_PASSWORD": "signer pass"}
    made = run("signer", "new", str(keystore), **password)
    assert made.exit_code == 0, made.output
    signer = Account.from_key(Account.decrypt(json.loads(keystore.read_text()), "signer pass")).address
    assert f"new signer {signer} in {keystore}" in " ".join(made.stdout.split())
    assert keystore.stat().st_mode & 0o777 == 0o600
    written = keystore.read_text()
    assert one_line_error(run("signer", "new", str(keystore), **password)) == (
        f"error: {keystore} exists; give a new file (an existing key is never overwritten)"
    )
    assert keystore.read_text() == written

    with_keystore = [*serve, "--signer-keystore", str(keystore)]
    assert one_line_error(run(*with_keystore, BATCHMARKET_SIGNER_KEYSTORE_PASSWORD="wrong")) == (
        f"error: cannot decrypt keystore {keystore}: wrong password or damaged file"
    )
    assert one_line_error(run(*with_keystore, **password)) == refusal(signer)
    assert run("signer", "set", signer).exit_code == 0
    assert "did not register" in one_line_error(run(*with_keystore, **password))  # the signer check passed
    # the key may come from the environment instead, as a service manager gives it
    key = {"BATCHMARKET_SIGNER_PRIVATE_KEY": Account.create().key.to_0x_hex()}
    assert "this node signs with 0x" in one_line_error(run(*serve, **key))


@pytest.mark.parametrize(
    "command",
    [
        (app, "serve", "--model", "HuggingFaceTB/SmolLM2-135M-Instruct"),
        (app, "run-local", "--input", "in.jsonl", "--output", "out.jsonl"),
        (arbitration_app, "verify"),
    ],
    ids=["serve", "run-local", "verify"],
)
def test_a_bad_checkpoint_directory_or_dtype_is_refused_before_any_key_is_loaded(
    command: tuple[typer.Typer | str, ...], tmp_path: Path
) -> None:
    """No key and no chain here: the refusal must come from reading the command line, first."""
    cli, *args = command
    checkpoint = build_checkpoint("llama", tmp_path / "llama")
    environment = {"BATCHMARKET_PRIVATE_KEY": None, "BATCHMARKET_RPC_URL": "http://127.0.0.1:9"}

    def invoke(*more: str) -> Result:
        return CliRunner().invoke(cli, [*map(str, args), *more], env=environment)

    assert (
        f"Invalid value for '--model-dir': {tmp_path} is not a checkpoint directory (it has no config.json)"
        in usage_error(invoke("--model-dir", str(tmp_path)))
    )
    assert (
        "Invalid value for '--dtype': dtype must be one of float32, float16, bfloat16, not 'float64'"
        in usage_error(invoke("--model-dir", str(checkpoint), "--dtype", "float64"))
    )


def test_keystore_key_and_wrong_password(
    admin_market: Market, run: Invoke, miner: LocalAccount, tmp_path: Path
) -> None:
    keystore = tmp_path / "miner.json"
    write_keystore(miner, keystore, "correct horse")
    admin_market.token.mint(miner.address, 100 * 10**6)
    wrong = run(*REGISTER, "--stake", "100", "--keystore", str(keystore), key=None,
                BATCHMARKET_KEYSTORE_PASSWORD="battery staple")  # fmt: skip
    assert (
        one_line_error(wrong) == f"error: cannot decrypt keystore {keystore}: wrong password or damaged file"
    )
    right = run(*REGISTER, "--stake", "100", "--keystore", str(keystore), key=None,
                BATCHMARKET_KEYSTORE_PASSWORD="correct horse")  # fmt: skip
    assert right.exit_code == 0, right.output
    assert admin_market.registry.is_registered(miner.address)


def test_stake_withdraw_unbonds_then_moves_the_stake_to_the_wallet(
    admin_market: Market, chain: Anvil, run: Invoke, miner: LocalAccount
) -> None:
    admin_market.token.mint(miner.address, 250 * 10**6)
    assert run(*REGISTER, "--stake", "250").exit_code == 0
    assert one_line_error(run("stake", "withdraw")) == (
        "error: nothing is unbonding: start with `miner stake withdraw --amount X` (or --all)"
    )
    assert run("stake", "withdraw", "--amount", "50").exit_code == 0
    assert one_line_error(run("stake", "withdraw", "--amount", "500")) == (
        "error: cannot unbond 500.000000 mUSD: only 200.000000 mUSD is free"
    )
    stake = admin_market.registry.stake_of(miner.address)
    assert (stake.free, stake.unbonding) == (200 * 10**6, 50 * 10**6)
    assert json.loads(run("stake", "show", "--json").stdout)["unbonded_at"] == utc(stake.unbonding_release_at)

    early = one_line_error(run("stake", "withdraw"))
    release = utc(stake.unbonding_release_at)
    assert early == f"error: 50.000000 mUSD unbonds at {release}; withdraw it then"
    assert one_line_error(run("withdraw")) == (
        "error: no earnings to withdraw yet (stake comes out with `miner stake withdraw`)"
    )

    chain.advance_time(UNBONDING_PERIOD)
    done = run("stake", "withdraw")
    assert done.exit_code == 0, done.output
    assert "withdrew unbonded stake of 50.000000 mUSD to your wallet" in " ".join(done.stdout.split())
    assert admin_market.token.balance_of(miner.address) == 50 * 10**6
    assert admin_market.registry.stake_of(miner.address).unbonding == 0


def test_unbonding_warns_when_it_restarts_a_wait_or_leaves_less_than_the_minimum_free(
    admin_market: Market, run: Invoke, miner: LocalAccount
) -> None:
    admin_market.token.mint(miner.address, 250 * 10**6)
    assert run(*REGISTER, "--stake", "250").exit_code == 0
    first = run("stake", "withdraw", "--amount", "50")
    assert first.exit_code == 0 and first.stderr == "", first.output
    due = utc(admin_market.registry.stake_of(miner.address).unbonding_release_at)
    second = run("stake", "withdraw", "--amount", "120")
    assert second.exit_code == 0, second.output
    release = utc(admin_market.registry.stake_of(miner.address).unbonding_release_at)
    assert second.stderr.splitlines() == [
        f"warning: the 50.000000 mUSD already unbonding (due {due}) waits again with it: all 170.000000 mUSD "
        f"unbond at {release}",
        "warning: this leaves 80.000000 mUSD of free stake, under the 100.000000 mUSD a registration must "
        "stake; every task this node takes locks part of what is free",
    ]
    stake = admin_market.registry.stake_of(miner.address)
    assert (stake.free, stake.unbonding) == (80 * 10**6, 170 * 10**6)


def test_signer_set_and_revoke_on_an_open_task(
    admin_market: Market, accounts: list[LocalAccount], run: Invoke, miner: LocalAccount
) -> None:
    """The miner's account points its signer at a new key and revokes the old one on its assigned task; a task
    not its own, one that does not exist, a second revocation and a bad address each get their one line."""
    coordinator, user, other = accounts[1], accounts[2], accounts[4]
    task_id = assigned_task(admin_market, coordinator, user, [miner])
    stranger_task = assigned_task(admin_market, coordinator, user, [other])
    fresh = Account.create().address

    assert "is not an address" in one_line_error(run("signer", "set", "0x1234"))
    result = run("signer", "set", fresh)
    assert result.exit_code == 0, result.output
    assert f"signer changed from {miner.address} to {fresh}" in " ".join(result.stdout.split())
    assert admin_market.registry.profile_of(miner.address).signer == fresh

    assert one_line_error(run("signer", "revoke", str(task_id), "999")) == "error: there is no task 999"
    assert admin_market.tasks.revoked_mask_of(task_id) == 0  # every id is checked before anything is sent
    assert "is not assigned to" in one_line_error(run("signer", "revoke", str(stranger_task)))
    result = run("signer", "revoke", str(task_id))
    assert result.exit_code == 0, result.output
    assert f"task {task_id}: revoked signer {miner.address}" in result.stdout
    assert admin_market.tasks.revoked_mask_of(task_id) == 1
    assert f"task {task_id}: already revoked" in run("signer", "revoke", str(task_id)).stdout


def test_entry_point_prints_one_line_without_traceback(tmp_path: Path) -> None:
    env = {"BATCHMARKET_PRIVATE_KEY": "0x" + "11" * 32, "PATH": "/usr/bin:/bin"}
    missing = tmp_path / "none.json"
    result = subprocess.run(
        [sys.executable, "-m", "miner", *REGISTER, "--stake", "100", "--deployment", str(missing)],
        env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.startswith(f"error: no deployment file at {missing}")
    assert result.stderr.count("\n") == 1


@pytest.mark.parametrize(
    ("relay", "message"),
    [
        (["--relay", "tcp://relay.example:5600"], "--relay and --relay-key go together"),
        (["--relay-key", "x" * 40], "--relay and --relay-key go together"),
        (
            ["--relay", "relay.example:5600", "--relay-key", "x" * 40],
            "--relay: 'relay.example:5600' is not an endpoint a stage can dial",
        ),
        (
            ["--relay", "tcp://relay.example:5600", "--relay-key", "short"],
            "--relay-key: 'short' is not a link key",
        ),
    ],
)
def test_a_bad_relay_is_refused_before_anything_starts(
    run: Invoke, relay: list[str], message: str, tmp_path: Path
) -> None:
    checkpoint = str(build_checkpoint("llama", tmp_path / "llama"))
    args = ["serve", "--coordinator", "http://127.0.0.1:9", "--model", "m", "--model-dir", checkpoint]
    assert one_line_error(run(*args, *relay)).startswith(f"error: {message}")


NOWHERE = "http://127.0.0.1:9"  # no coordinator: the relay says so once and serves the members it knows


def relay_command(port: int, key_file: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "miner",
        "relay",
        "--listen",
        f"tcp://127.0.0.1:{port}",
        "--key-file",
        str(key_file),
        "--coordinator",
        NOWHERE,
    ]


def test_the_relay_command_says_where_it_listens_and_its_key(tmp_path: Path) -> None:
    """`miner relay` prints its address and key (as it is, brackets included: rich's markup would drop a
    `[...]` of a Z85 key), keeps its key across restarts, and explains a taken port."""
    key_file = tmp_path / "relay.key"
    bracketed = next(k for k in iter(LinkKeys.generate, None) if re.search(rb"\[[a-z]+\]", k.public))
    key_file.write_bytes(bracketed.public + b"\n" + bracketed.secret + b"\n")
    key_file.chmod(0o600)
    port = free_port()
    keys = []
    for _start in range(2):
        relay = subprocess.Popen(relay_command(port, key_file), stdout=subprocess.PIPE, text=True)
        try:
            assert relay.stdout is not None
            assert relay.stdout.readline().strip() == f"relay listening on tcp://127.0.0.1:{port}"
            keys.append(relay.stdout.readline().strip())
            assert relay.stdout.readline().strip() == f"serving the miners joined at {NOWHERE}"
            taken = subprocess.run(relay_command(port, key_file), capture_output=True, text=True, check=False)
            assert taken.returncode == 1
            assert taken.stderr.startswith(
                f"error: cannot listen on tcp://127.0.0.1:{port}: Address already in use"
            )
        finally:
            relay.terminate()
            relay.wait(10)
    key = key_file.read_bytes().split()[0].decode()
    assert keys == [f"its key (give it with --relay-key): {key}"] * 2
    assert (key_file.stat().st_mode & 0o777) == 0o600


def test_ctrl_c_stops_the_relay_cleanly(tmp_path: Path) -> None:
    """Ctrl-C ends the relay with its counts and exit status 0, never a traceback from its serving thread
    (the relay was once closed under a loop still polling)."""
    relay = subprocess.Popen(
        relay_command(free_port(), tmp_path / "relay.key"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert relay.stdout is not None
    for _ in range(3):  # where it listens, its key, whom it serves
        relay.stdout.readline()
    relay.send_signal(signal.SIGINT)
    out, err = relay.communicate(timeout=30)
    assert relay.returncode == 0 and "Traceback" not in err
    assert out.strip().splitlines()[-1] == "relayed 0 messages; dropped 0"
