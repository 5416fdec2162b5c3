"""`arbitration dispute open | show | list | resolve`: challenge one committed result line with a bond,
follow the dispute on-chain and resolve it after the voting deadline."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Annotated

import typer
from rich.table import Table

from client_sdk.batch_cli import DEFAULT_COORDINATOR, CoordinatorOption
from client_sdk.chain.contracts import Market
from client_sdk.chain.types import Dispute, DisputeStatus, TaskStatus
from client_sdk.cli_support import (
    DEFAULT_DEPLOYMENT,
    DEFAULT_RPC_URL,
    DeploymentOption,
    JsonOption,
    KeystoreOption,
    RpcUrlOption,
    console,
    load_cli_account,
    one_line_errors,
    open_market,
)
from client_sdk.client import ApiError, Client
from client_sdk.errors import UserError
from client_sdk.units import format_amount
from client_sdk.verify import VerifiedLine, check_inputs

app = typer.Typer(
    help="Dispute results and verify disputes.", no_args_is_help=True, pretty_exceptions_enable=False
)
dispute_app = typer.Typer(help="Disputes over single result lines.", no_args_is_help=True)
app.add_typer(dispute_app, name="dispute")

MAX_SCAN = 1_000  # `list` reads at most this many of the newest disputes
OUTCOMES = {
    DisputeStatus.MINERS_AT_FAULT: "the miners were at fault: their stake is slashed, the owner refunded",
    DisputeStatus.MINERS_CORRECT: (
        "the results were correct: the task settles and the bond pays the verifiers and the miners"
    ),
    DisputeStatus.NO_DECISION: (
        "no votes or a tie: the results stand, the task settles and the bond goes back to the challenger"
    ),
}
AUDIT_NO_DECISION = (
    "no votes or a tie: the results stand, the task settles and the bond goes back to the audit pool"
)

DisputeIdArgument = Annotated[int, typer.Argument(min=1, help="On-chain dispute id.")]


def _when(timestamp: int) -> str:
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _existing(market: Market, dispute_id: int) -> Dispute:
    record = market.arbitration.get_dispute(dispute_id)
    if record.status == DisputeStatus.NONE:
        raise UserError(f"there is no dispute {dispute_id}")
    return record


def _report(dispute_id: int, record: Dispute) -> dict[str, object]:
    return {
        "dispute": dispute_id,
        "task": record.task_id,
        "request_index": record.request_index,
        "challenger": record.challenger,
        "bond": format_amount(record.bond),
        "status": record.status.name.lower(),
        "votes_correct": record.votes_correct,
        "votes_at_fault": record.votes_at_fault,
        "voting_deadline": record.voting_deadline,
        "leaf_hash": "0x" + record.leaf_hash.hex(),
        "audit": record.audit,
    }


def _check_disputable(market: Market, task_id: int) -> None:
    """Refuses, before any transaction, what the contract would refuse: a second dispute, a closed window."""
    existing = market.arbitration.dispute_of_task(task_id)
    if existing:
        raise UserError(
            f"task {task_id} already has dispute {existing} (one per task): see `arbitration dispute show "
            f"{existing}`"
        )
    task = market.tasks.get_task(task_id)
    closes = task.committed_at + market.tasks.challenge_window()
    if task.committed_at and market.chain_time() >= closes:
        raise UserError(f"the challenge window of task {task_id} closed at {_when(closes)}")
    if task.status != TaskStatus.RESULTS_COMMITTED:
        raise UserError(
            f"task {task_id} is {task.status.name.lower()}: it has no committed results to dispute"
        )


def _disputed_line(client: Client, batch_id: str, custom_id: str) -> VerifiedLine:
    """The line with its leaf and proof, from results that verify against the chain (so it is in the root)."""
    with console.status("downloading and verifying the results against the chain"):
        verified = client.batches.results(batch_id)
    line = next((v for v in (*verified.output, *verified.errors) if v.line["custom_id"] == custom_id), None)
    if line is None:
        raise UserError(f"batch {batch_id} has no result line with custom_id {custom_id!r}")
    return line


def _allow_bond(market: Market, owner: str) -> None:
    """Checks that the owner holds the bond and lets the escrow pull it (openDispute's last step)."""
    bond, balance = market.arbitration.dispute_bond(), market.token.balance_of(owner)
    if balance < bond:
        raise UserError(
            f"the dispute bond is {format_amount(bond)} but {owner} holds {format_amount(balance)}"
        )
    market.token.allow(owner, market.escrow.address, bond)


@dispute_app.command("open")
@one_line_errors
def open_dispute(
    batch_id: Annotated[str, typer.Option("--batch", help="Batch id (batch_...).")],
    custom_id: Annotated[str, typer.Option("--custom-id", help="The custom_id of the line to dispute.")],
    reason: Annotated[str | None, typer.Option(help="Why the line looks wrong (published with it).")] = None,
    coordinator: CoordinatorOption = DEFAULT_COORDINATOR,
    rpc_url: RpcUrlOption = DEFAULT_RPC_URL,
    deployment: DeploymentOption = DEFAULT_DEPLOYMENT,
    keystore: KeystoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Challenge one result line: post the bond, open the dispute on-chain and publish its evidence."""
    client = Client(coordinator, key=load_cli_account(keystore), rpc_url=rpc_url, deployment=deployment)
    me = client.account.address
    try:
        batch = client.batches.retrieve(batch_id)
    except ApiError as exc:
        if exc.status != 404:
            raise
        raise UserError(
            f"batch {batch_id} is not a batch of {me}: only its owner can dispute its lines"
        ) from None
    market = client.market
    _check_disputable(market, batch.task_id)
    disputed = _disputed_line(client, batch_id, custom_id)
    request_line = check_inputs(market, batch.task_id, client.files.content(batch.input_file_id))[
        disputed.leaf.request_index
    ]
    _allow_bond(market, me)
    dispute_id = market.arbitration.open_dispute(disputed.leaf, disputed.proof)
    evidence = {"request_line": request_line, "result_line": disputed.line, "reason": reason}
    try:
        client.request("POST", f"/v1/disputes/{dispute_id}/evidence", json=evidence)
    except UserError as exc:
        raise UserError(
            f"dispute {dispute_id} is open on-chain, but its evidence was not published: {exc}"
        ) from exc
    record = market.arbitration.get_dispute(dispute_id)
    if as_json:
        console.print_json(json.dumps(_report(dispute_id, record) | {"custom_id": custom_id}))
        return
    console.print(
        f"dispute {dispute_id} opened on task {record.task_id}, line {record.request_index} (custom_id "
        f"{custom_id!r}): bond {format_amount(record.bond)} posted, evidence published; verifiers vote until "
        f"{_when(record.voting_deadline)}",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )


@dispute_app.command("show")
@one_line_errors
def show(
    dispute_id: DisputeIdArgument,
    rpc_url: RpcUrlOption = DEFAULT_RPC_URL,
    deployment: DeploymentOption = DEFAULT_DEPLOYMENT,
    as_json: JsonOption = False,
) -> None:
    """Show a dispute: its task, line, bond, votes and outcome."""
    market = open_market(rpc_url, deployment, None, signing=False)
    record = _existing(market, dispute_id)
    report = _report(dispute_id, record)
    if as_json:
        console.print_json(json.dumps(report))
        return
    table = Table(show_header=False, title=f"dispute {dispute_id}")
    for key, value in (report | {"voting_deadline": _when(record.voting_deadline)}).items():
        table.add_row(key.replace("_", " "), str(value))
    console.print(table)


@dispute_app.command("list")
@one_line_errors
def list_disputes(
    mine: Annotated[bool, typer.Option("--mine", help="Only disputes over your tasks (audits too).")] = False,
    limit: Annotated[int, typer.Option(min=1, max=100, help="How many, newest first.")] = 20,
    rpc_url: RpcUrlOption = DEFAULT_RPC_URL,
    deployment: DeploymentOption = DEFAULT_DEPLOYMENT,
    keystore: KeystoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """List disputes, newest first, from the chain (among the newest 1,000)."""
    market = open_market(rpc_url, deployment, keystore, signing=mine)
    challenger = market.address if mine else None
    newest = market.arbitration.dispute_count()
    found: list[tuple[int, Dispute]] = []
    for dispute_id in range(newest, max(0, newest - MAX_SCAN), -1):
        record = market.arbitration.get_dispute(dispute_id)
        if challenger is None or record.challenger == challenger:
            found.append((dispute_id, record))
        if len(found) == limit:
            break
    if as_json:
        console.print_json(json.dumps([_report(dispute_id, record) for dispute_id, record in found]))
        return
    table = Table("dispute", "task", "line", "status", "votes correct", "votes at fault", "voting ends")
    for dispute_id, d in found:
        cells = (
            dispute_id,
            d.task_id,
            d.request_index,
            d.status.name.lower(),
            d.votes_correct,
            d.votes_at_fault,
        )
        table.add_row(*map(str, cells), _when(d.voting_deadline))
    console.print(table)


@dispute_app.command("resolve")
@one_line_errors
def resolve(
    dispute_id: DisputeIdArgument,
    rpc_url: RpcUrlOption = DEFAULT_RPC_URL,
    deployment: DeploymentOption = DEFAULT_DEPLOYMENT,
    keystore: KeystoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Resolve a dispute after its voting deadline (anyone may): the votes decide where the money goes."""
    market = open_market(rpc_url, deployment, keystore, signing=True)
    record = _existing(market, dispute_id)
    if record.status != DisputeStatus.OPEN:
        raise UserError(f"dispute {dispute_id} is already resolved: {record.status.name.lower()}")
    now = market.chain_time()
    if now < record.voting_deadline:
        raise UserError(
            f"verifiers vote on dispute {dispute_id} until {_when(record.voting_deadline)} (chain time is "
            f"{_when(now)}): resolve it after that"
        )
    outcome = market.arbitration.resolve(dispute_id)
    said = AUDIT_NO_DECISION if record.audit and outcome == DisputeStatus.NO_DECISION else OUTCOMES[outcome]
    if as_json:
        console.print_json(json.dumps(_report(dispute_id, market.arbitration.get_dispute(dispute_id))))
        return
    console.print(f"dispute {dispute_id}: {outcome.name.lower()}: {said}", markup=False, soft_wrap=True)
