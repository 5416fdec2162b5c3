"""`arbitration`: disputes over committed results. Today: inspect a dispute on-chain."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from client_sdk.chain.types import DisputeStatus
from client_sdk.cli_support import (
    DEFAULT_DEPLOYMENT,
    DEFAULT_RPC_URL,
    DeploymentOption,
    RpcUrlOption,
    console,
    one_line_errors,
    open_market,
)
from client_sdk.errors import UserError
from client_sdk.units import format_amount

app = typer.Typer(
    help="Dispute results and verify disputes.", no_args_is_help=True, pretty_exceptions_enable=False
)
dispute_app = typer.Typer(help="Disputes over single result lines.", no_args_is_help=True)
app.add_typer(dispute_app, name="dispute")


@dispute_app.command("show")
@one_line_errors
def show(
    dispute_id: Annotated[int, typer.Argument(help="On-chain dispute id.")],
    rpc_url: RpcUrlOption = DEFAULT_RPC_URL,
    deployment: DeploymentOption = DEFAULT_DEPLOYMENT,
) -> None:
    """Show a dispute: its task, line, bond, votes and outcome."""
    market = open_market(rpc_url, deployment, None, signing=False)
    record = market.arbitration.get_dispute(dispute_id)
    if record.status == DisputeStatus.NONE:
        raise UserError(f"there is no dispute {dispute_id}")
    report = {
        "dispute": dispute_id,
        "task": record.task_id,
        "request_index": record.request_index,
        "challenger": record.challenger,
        "bond": format_amount(record.bond),
        "status": record.status.name.lower(),
        "votes_correct": record.votes_correct,
        "votes_at_fault": record.votes_at_fault,
        "voting_deadline": record.voting_deadline,
    }
    console.print_json(json.dumps(report))
