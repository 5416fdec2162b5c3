"""`market`: the user's command line: submit batches, follow them, download verified results, cancel; inspect
tasks on-chain, reclaim one past its deadline, see and withdraw balances."""

from __future__ import annotations

from typing import Annotated

import typer

from client_sdk.chain.contracts import Market
from client_sdk.cli import batches as batch_cli
from client_sdk.cli.support import (
    JsonOption,
    command_group,
    console,
    on_chain,
    show_report,
)
from client_sdk.errors import UserError
from client_sdk.protocol.model_identity import describe
from client_sdk.protocol.task import Task, TaskStatus
from client_sdk.units import format_amount, parse_amount

app = command_group("Use the batch inference market as a customer.")


@app.command()
@on_chain(signing=False)
def task(
    market: Market,
    task_id: Annotated[int, typer.Argument(help="On-chain task id.")],
    as_json: JsonOption = False,
) -> None:
    """Show a task as recorded on-chain."""
    record = _existing_task(market, task_id)
    report = {
        "task": task_id,
        "status": record.status.name.lower(),
        "owner": record.owner,
        "model": describe(record.model_id),
        "requests": record.request_count,
        "max_price": format_amount(record.max_price),
        "payment": format_amount(record.payment),
        "deadline": record.deadline,
        "results_root": "0x" + record.results_root.hex(),
        "miners": market.tasks.miners_of(task_id),
    }
    show_report(report, f"task {task_id}", as_json)


@app.command()
@on_chain(signing=True)
def balance(
    market: Market,
) -> None:
    """Show your wallet balance and what the escrow owes you (refunds, payments)."""
    me = market.address
    console.print(f"wallet        {market.amount(market.token.balance_of(me))}")
    console.print(f"withdrawable  {market.amount(market.escrow.balance_of(me))}")


GAS_MONEY = 10**20  # wei a faucet gives a wallet on a local anvil chain, when it has less than 1 ether


@app.command()
@on_chain(signing=True)
def faucet(
    market: Market,
    amount: Annotated[str, typer.Argument(help="Test tokens to mint, e.g. 1000.")],
    to: Annotated[str | None, typer.Option(help="Who receives them (default: this wallet).")] = None,
) -> None:
    """Devnet only (a local anvil node): mint test tokens of the deployment's mock token (with the minter's
    key: the deployer's), and give the receiver gas money."""
    value = parse_amount(amount)
    node = str(market.w3.client_version)
    if not node.lower().startswith("anvil"):  # a devnet's own tokens only: never on a shared chain
        raise UserError(f"the faucet is for a local anvil devnet; this chain's node is {node[:60]}")
    try:
        receiver = market.w3.to_checksum_address(to or market.address)
    except ValueError:
        raise UserError(f"{to!r} is not an address") from None
    if not market.token.can_mint(market.address):
        raise UserError(
            f"{market.address} cannot mint test tokens: run the faucet with the devnet deployer's key (the "
            "token's minter)"
        )
    market.token.mint(receiver, value)
    w3 = market.w3
    if w3.eth.get_balance(receiver) < 10**18:
        w3.provider.make_request("anvil_setBalance", [receiver, hex(GAS_MONEY)])  # type: ignore[arg-type]
    console.print(f"minted {market.amount(value)} to {receiver}")


@app.command()
@on_chain(signing=True)
def withdraw(
    market: Market,
) -> None:
    """Withdraw everything the escrow owes you."""
    owed = market.escrow.balance_of(market.address)
    if owed == 0:
        raise UserError("nothing to withdraw")
    market.escrow.withdraw()
    console.print(f"withdrew {market.amount(owed)}")


@app.command()
@on_chain(signing=True)
def reclaim(
    market: Market,
    task_id: Annotated[int, typer.Argument(help="On-chain task id.")],
) -> None:
    """Get a task's whole escrow back once its deadline passed without results (anyone may call it; the
    refund goes to the task's owner, who withdraws it with `market withdraw`)."""
    record = _existing_task(market, task_id)
    if record.status not in (TaskStatus.OPEN, TaskStatus.ASSIGNED):
        state = record.status.name.lower().replace("_", " ")
        if record.status in (TaskStatus.EXPIRED, TaskStatus.CANCELLED):
            why = f"its escrow went back to its owner {record.owner} already (`market withdraw` takes it out)"
        elif record.status == TaskStatus.FINALIZED:
            why = "it was settled, and what it did not spend went back to its owner (`market withdraw`)"
        else:
            why = "its results settle after the challenge window (and any dispute), refunding what is unused"
        raise UserError(f"task {task_id} is {state}: {why}")
    now = market.chain_time()
    if now <= record.deadline:
        raise UserError(
            f"task {task_id} can be reclaimed after its deadline, in {record.deadline - now + 1} s; before "
            "that, `market cancel` stops its batch and refunds what was not served"
        )
    market.tasks.expire_task(task_id)
    console.print(
        f"task {task_id} expired: {market.amount(record.max_price)} back to its owner {record.owner} "
        "(`market withdraw` takes it out)"
    )


def _existing_task(market: Market, task_id: int) -> Task:
    record = market.tasks.get_task(task_id)
    if record.status == TaskStatus.NONE:
        raise UserError(f"there is no task {task_id}")
    return record


for command in (batch_cli.submit, batch_cli.status, batch_cli.results, batch_cli.cancel):
    app.command()(command)
app.command("list")(batch_cli.list_batches)
