"""`market submit | status | results | cancel | list`: the batch commands of the user's CLI."""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from client_sdk.cli.support import (
    DEFAULT_COORDINATOR,
    DEFAULT_DEPLOYMENT,
    DEFAULT_RPC_URL,
    CoordinatorOption,
    DeploymentOption,
    JsonOption,
    KeystoreOption,
    RpcUrlOption,
    console,
    error_console,
    one_line_errors,
    open_client,
    with_client,
)
from client_sdk.client import Batch, Client
from client_sdk.errors import UserError
from client_sdk.openai_batch import BatchFormatError, parse_batch
from client_sdk.protocol.constants import FINAL_BATCH_STATUSES
from client_sdk.protocol.model_identity import describe
from client_sdk.protocol.task import TaskPrices, TaskStatus
from client_sdk.units import parse_amount


def _summary(batch: Batch) -> dict[str, object]:
    counts = batch.request_counts
    return {
        "id": batch.id,
        "status": batch.status,
        "task_id": batch.task_id,
        "completed": counts.completed,
        "failed": counts.failed,
        "total": counts.total,
        "output_file_id": batch.output_file_id,
        "error_file_id": batch.error_file_id,
        "results_root": batch.results_root,
    }


def _print(batch: Batch, as_json: bool) -> None:
    if as_json:
        console.print_json(json.dumps(batch.model_dump()))
        return
    table = Table(show_header=False, title=f"batch {batch.id}")
    for key, value in _summary(batch).items():
        table.add_row(key.replace("_", " "), "-" if value is None else str(value))
    if batch.usage is not None:
        table.add_row("tokens", f"{batch.usage.input_tokens} in, {batch.usage.output_tokens} out")
    if batch.status_detail:
        table.add_row("why", batch.status_detail)
    for error in batch.errors.data if batch.errors else []:
        where = f" (line {error.line})" if error.line is not None else ""
        table.add_row("failed because", f"{error.message}{where}")
    console.print(table)


def _wait(client: Client, batch: Batch, quiet: bool) -> Batch:
    columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn())  # fmt: skip
    with Progress(*columns, console=console, transient=True, disable=quiet) as progress:
        bar = progress.add_task(batch.status, total=batch.request_counts.total)
        while batch.status not in FINAL_BATCH_STATUSES:
            time.sleep(1.0)
            batch = client.batches.retrieve(batch.id)
            done = batch.request_counts.completed + batch.request_counts.failed
            progress.update(bar, completed=done, description=batch.status_detail or batch.status)
    return batch


@one_line_errors
def submit(
    file: Annotated[Path, typer.Argument(help="OpenAI Batch JSONL file.")],
    model: Annotated[str, typer.Option(help="The model every request names (checked against the file).")],
    max_price: Annotated[
        str, typer.Option(help="Most you pay, in tokens; escrowed now, the unused part refunded.")
    ],
    completion_window: Annotated[str, typer.Option(help="Hours to finish in, like 24h.")] = "24h",
    model_hash: Annotated[
        str | None,
        typer.Option(
            help="The 0x hash of the weights you expect (a known model's is pinned already); the task is not "
            "created if the coordinator serves other weights."
        ),
    ] = None,
    input_price: Annotated[
        str | None,
        typer.Option(help="Tokens you pay per million input tokens; default: what the coordinator asks."),
    ] = None,
    output_price: Annotated[
        str | None,
        typer.Option(help="Tokens you pay per million output tokens; default: what the coordinator asks."),
    ] = None,
    wait: Annotated[bool, typer.Option("--wait", help="Show progress until the batch is done.")] = False,
    coordinator: CoordinatorOption = DEFAULT_COORDINATOR,
    rpc_url: RpcUrlOption = DEFAULT_RPC_URL,
    deployment: DeploymentOption = DEFAULT_DEPLOYMENT,
    keystore: KeystoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Upload a batch file, escrow the max price on-chain and start the batch (one payment). You pay the
    tokens served at the task's prices, at most the max price; the rest is refunded."""
    try:
        data = file.read_bytes()
    except OSError as exc:
        raise UserError(f"cannot read {file}: {exc.strerror}") from None
    try:
        lines = parse_batch(data, max_lines=max(1, data.count(b"\n") + 1))
    except BatchFormatError as exc:
        raise UserError(f"{file}: {exc}") from None
    wrong = next((line for line in lines if line.model != model), None)
    if wrong is not None:
        raise UserError(f"{file}: line {wrong.line_number} asks for model {wrong.model!r}, not {model!r}")
    client = open_client(coordinator, rpc_url, deployment, keystore)
    asking = client.batches.asking_prices()
    prices = TaskPrices(
        parse_amount(input_price) if input_price is not None else asking.input_per_million,
        parse_amount(output_price) if output_price is not None else asking.output_per_million,
    )
    quiet = contextlib.nullcontext()
    with console.status(f"uploading {file.name} ({len(lines)} requests)") if not as_json else quiet:
        uploaded = client.files.create(file=file, purpose="batch")
    with console.status("escrowing the max price and creating the task") if not as_json else quiet:
        batch = client.batches.create(
            input_file_id=uploaded.id,
            endpoint=lines[0].url,
            max_price=parse_amount(max_price),
            completion_window=completion_window,
            prices=prices,
            model_hash=model_hash,
        )
    market = client.market
    task_model = market.tasks.get_task(batch.task_id).model_id
    if market.verifiers.total_weight(task_model) == 0:
        error_console.print(
            f"warning: no verifier judges {describe(task_model)} now, so a wrong line of this batch could "
            f"not be disputed; `market cancel {batch.id}` refunds the escrow while no miner has started",
            soft_wrap=True,
            markup=False,
        )
    if not as_json:
        escrowed = market.amount(parse_amount(max_price))
        console.print(
            f"batch {batch.id} (task {batch.task_id}, model {describe(task_model)}) with {escrowed} in "
            "escrow, paying "
            f"{market.amount(prices.input_per_million)} per million input and "
            f"{market.amount(prices.output_per_million)} per million output tokens"
        )
    if wait:
        batch = _wait(client, batch, quiet=as_json)
    _print(batch, as_json)


@with_client
def status(
    client: Client,
    batch_id: Annotated[str, typer.Argument(help="Batch id (batch_...).")],
    wait: Annotated[bool, typer.Option("--wait", help="Show progress until the batch is done.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Show a batch's status and request counts."""
    batch = client.batches.retrieve(batch_id)
    if wait:
        batch = _wait(client, batch, quiet=as_json)
    _print(batch, as_json)


@with_client
def results(
    client: Client,
    batch_id: Annotated[str, typer.Argument(help="Batch id (batch_...).")],
    output: Annotated[Path, typer.Option("-o", "--output", help="Where to write the output lines.")],
    errors: Annotated[
        Path | None, typer.Option(help="Where to write the error lines (default: OUTPUT with .errors.jsonl).")
    ] = None,
) -> None:
    """Download the results and check every line against the chain before writing it."""
    with console.status("downloading and verifying against the chain", spinner="dots"):
        verified = client.batches.results(batch_id)
    errors = errors or output.with_suffix(".errors.jsonl")
    for path, lines in ((output, verified.output), (errors, verified.errors)):
        if lines or path == output:
            path.write_text("".join(json.dumps(v.line) + "\n" for v in lines))
    written = f"{len(verified.output)} results to {output}"
    if verified.errors:
        written += f", {len(verified.errors)} errors to {errors}"
    console.print(f"{written}; every line verified against the on-chain commitment")


@with_client
def cancel(
    client: Client,
    batch_id: Annotated[str, typer.Argument(help="Batch id (batch_...).")],
) -> None:
    """Cancel a batch: finished requests are kept and paid for, the rest of the escrow comes back."""
    batch = client.batches.cancel(batch_id)
    if client.market.tasks.get_task(batch.task_id).status == TaskStatus.CANCELLED:  # no miner had started
        console.print(f"batch {batch_id} cancelled; task {batch.task_id} cancelled on-chain, escrow refunded")
        return
    console.print(f"batch {batch_id} is {batch.status}: finished requests settle, the rest is refunded")


@with_client
def list_batches(
    client: Client,
    limit: Annotated[int, typer.Option(min=1, max=100, help="How many, newest first.")] = 20,
    as_json: JsonOption = False,
) -> None:
    """List your batches."""
    page = client.batches.list(limit=limit)
    if as_json:
        console.print_json(json.dumps([_summary(b) for b in page.data]))
        return
    table = Table("id", "status", "task", "done", "failed", "total")
    for batch in page.data:
        c = batch.request_counts
        table.add_row(
            batch.id, batch.status, str(batch.task_id), str(c.completed), str(c.failed), str(c.total)
        )
    console.print(table)
