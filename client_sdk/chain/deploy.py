"""Deploys the market to an RPC endpoint with the forge deploy script and writes the deployment file.

The Solidity script is the single place where contracts are wired; this helper runs it and moves its output.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from dataclasses import dataclass, fields
from pathlib import Path

from client_sdk.chain.deployment import Deployment
from client_sdk.chain.rpc import open_rpc
from client_sdk.chain.toolchain import foundry_binary, project_root
from client_sdk.errors import ChainError


@dataclass(frozen=True)
class DeployParams:
    """Market parameters; None keeps the script's default. Amounts are token base units, times in seconds."""

    coordinator: str | None = None
    fee_recipient: str | None = None
    token: str | None = None
    min_stake: int | None = None
    unbonding_period: int | None = None
    challenge_window: int | None = None
    coordinator_fee_bps: int | None = None
    min_stake_lock: int | None = None
    max_value_at_risk: int | None = None
    dispute_bond: int | None = None
    voting_period: int | None = None
    verifier_reward_bps: int | None = None
    min_verifier_stake: int | None = None
    verifier_unbonding_period: int | None = None
    audit_rate_bps: int | None = None
    juror_penalty_bps: int | None = None
    no_decision_fee_bps: int | None = None
    base_jury: int | None = None
    audit_reward_per_day: int | None = None
    timelock_delay: int | None = None
    answer_period: int | None = None

    def environment(self) -> dict[str, str]:
        """The script reads each parameter from an environment variable named like the field, in capitals."""
        return {
            f.name.upper(): str(getattr(self, f.name))
            for f in fields(self)
            if getattr(self, f.name) is not None
        }


def deploy(rpc_url: str, private_key: str, out: Path, params: DeployParams | None = None) -> Deployment:
    """Deploys everything from the account of `private_key` (it becomes admin) and writes `out`."""
    open_rpc(rpc_url)  # fail with a clear message before forge does with a long one
    root = project_root()
    scratch = Path("deployments") / f"{uuid.uuid4().hex}.json"
    (root / "deployments").mkdir(exist_ok=True)
    env = os.environ | (params or DeployParams()).environment()
    env |= {"DEPLOYER_PRIVATE_KEY": private_key, "DEPLOYMENT_FILE": str(scratch)}
    result = subprocess.run(
        [
            foundry_binary("forge"),
            "script",
            "contracts/script/Deploy.s.sol",
            "--rpc-url",
            rpc_url,
            "--broadcast",
            "--slow",
        ],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    produced = root / scratch
    if result.returncode != 0 or not produced.is_file():
        tail = (result.stderr or result.stdout).strip().splitlines()[-1:] or ["no output"]
        raise ChainError(f"deployment to {rpc_url} failed: {tail[0]}")
    deployment = Deployment.load(produced)
    produced.unlink()
    deployment.save(out)
    return deployment
