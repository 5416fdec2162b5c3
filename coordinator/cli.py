"""`coordinator`: operator commands. Today: deploy the market contracts and write the deployment file."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from client_sdk.chain.deploy import DeployParams, deploy
from client_sdk.cli_support import (
    DEFAULT_DEPLOYMENT,
    DEFAULT_RPC_URL,
    KeystoreOption,
    RpcUrlOption,
    console,
    one_line_errors,
)
from client_sdk.keys import load_account
from client_sdk.units import parse_amount

app = typer.Typer(
    help="Operate a batchmarket coordinator.", no_args_is_help=True, pretty_exceptions_enable=False
)


@app.callback()
def main() -> None:
    """Operate a batchmarket coordinator."""


@app.command("deploy")
@one_line_errors
def deploy_command(
    out: Annotated[Path, typer.Option(help="Where to write the deployment file.")] = DEFAULT_DEPLOYMENT,
    coordinator: Annotated[
        str | None, typer.Option(help="Coordinator address (default: the deployer).")
    ] = None,
    token: Annotated[
        str | None, typer.Option(help="Existing payment token (default: deploy a mock).")
    ] = None,
    min_stake: Annotated[str, typer.Option(help="Minimum miner stake, in tokens.")] = "100",
    challenge_window: Annotated[int, typer.Option(help="Seconds to dispute committed results.")] = 86_400,
    voting_period: Annotated[int, typer.Option(help="Seconds verifiers have to vote.")] = 86_400,
    unbonding_period: Annotated[
        int, typer.Option(help="Seconds before unstaked tokens can leave; must exceed window + voting.")
    ] = 3 * 86_400,
    fee_bps: Annotated[int, typer.Option(help="Coordinator fee in basis points of each payment.")] = 500,
    rpc_url: RpcUrlOption = DEFAULT_RPC_URL,
    keystore: KeystoreOption = None,
) -> None:
    """Deploy token, registry, escrow, task registry and arbitration with roles wired."""
    account = load_account(keystore)
    params = DeployParams(
        coordinator=coordinator,
        token=token,
        min_stake=parse_amount(min_stake),
        challenge_window=challenge_window,
        voting_period=voting_period,
        unbonding_period=unbonding_period,
        coordinator_fee_bps=fee_bps,
    )
    result = deploy(rpc_url, account.key.to_0x_hex(), out, params)
    console.print(f"deployed on chain {result.chain_id} at block {result.block}; wrote {out}")
