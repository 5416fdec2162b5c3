"""`market`: the user's command line: submit batches, follow them, download verified results, cancel; inspect
tasks on-chain, see and withdraw balances."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.table import Table

from client_sdk import batch_cli
from client_sdk.chain.types import TaskStatus
from client_sdk.cli_support import (
    DEFAULT_DEPLOYMENT,
    DEFAULT_RPC_URL,
    DeploymentOption,
    JsonOption,
    KeystoreOption,
    RpcUrlOption,
    console,
    one_line_errors,
    open_market,
)
from client_sdk.errors import UserError
from client_sdk.units import format_amount

app = typer.Typer(
    help="Use the batch inference market as a customer.", no_args_is_help=True, pretty_exceptions_enable=False
)


@app.command()
@one_line_errors
def task(
    task_id: Annotated[int, typer.Argument(help="On-chain task id.")],
    rpc_url: RpcUrlOption = DEFAULT_RPC_URL,
    deployment: DeploymentOption = DEFAULT_DEPLOYMENT,
    as_json: JsonOption = False,
) -> None:
    """Show a task as recorded on-chain."""
    market = open_market(rpc_url, deployment, None, signing=False)
    record = market.tasks.get_task(task_id)
    if record.status == TaskStatus.NONE:
        raise UserError(f"there is no task {task_id}")
    report = {
        "task": task_id,
        "status": record.status.name.lower(),
        "owner": record.owner,
        "requests": record.request_count,
        "max_price": format_amount(record.max_price),
        "payment": format_amount(record.payment),
        "deadline": record.deadline,
        "results_root": "0x" + record.results_root.hex(),
        "miners": market.tasks.miners_of(task_id),
    }
    if as_json:
        console.print_json(json.dumps(report))
        return
    table = Table(title=f"task {task_id}", show_header=False)
    for key, value in report.items():
        table.add_row(key.replace("_", " "), ", ".join(value) if isinstance(value, list) else str(value))
    console.print(table)


@app.command()
@one_line_errors
def balance(
    rpc_url: RpcUrlOption = DEFAULT_RPC_URL,
    deployment: DeploymentOption = DEFAULT_DEPLOYMENT,
    keystore: KeystoreOption = None,
) -> None:
    """Show your wallet balance and what the escrow owes you (refunds, payments)."""
    market = open_market(rpc_url, deployment, keystore, signing=True)
    me = market.address
    console.print(f"wallet        {format_amount(market.token.balance_of(me))}")
    console.print(f"withdrawable  {format_amount(market.escrow.balance_of(me))}")


@app.command()
@one_line_errors
def withdraw(
    rpc_url: RpcUrlOption = DEFAULT_RPC_URL,
    deployment: DeploymentOption = DEFAULT_DEPLOYMENT,
    keystore: KeystoreOption = None,
) -> None:
    """Withdraw everything the escrow owes you."""
    market = open_market(rpc_url, deployment, keystore, signing=True)
    owed = market.escrow.balance_of(market.address)
    if owed == 0:
        raise UserError("nothing to withdraw")
    market.escrow.withdraw()
    console.print(f"withdrew {format_amount(owed)}")


for command in (batch_cli.submit, batch_cli.status, batch_cli.results, batch_cli.cancel):
    app.command()(one_line_errors(command))
app.command("list")(one_line_errors(batch_cli.list_batches))
