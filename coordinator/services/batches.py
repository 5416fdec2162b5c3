"""Batches as the user sees them: create, read, list, cancel, and their OpenAI-shaped representation."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from client_sdk.inputs import params_hash
from client_sdk.protocol.task import Task, TaskPrices, TaskStatus
from client_sdk.units import format_amount
from coordinator.config import ServedModel
from coordinator.db.models import Batch, File, Result, Signature
from coordinator.services.errors import InvalidInput, NotFound
from coordinator.services.ids import new_id
from coordinator.services.pages import newest_first

# OpenAI's statuses; the last four are final
CANCELLABLE = ("validating", "in_progress")
MAX_METADATA_PAIRS, MAX_METADATA_KEY, MAX_METADATA_VALUE = 16, 64, 512
TASK_ID_KEY = "task_id"  # openai-python's batches.create has no task id: metadata carries it
# What became of the escrow of a batch that can no longer be cancelled, by its status (said when one tries)
AFTER_THE_END = {
    "finalizing": "its lines are done and settle after the challenge window, refunding the unused budget",
    "completed": "its lines settle after the challenge window, refunding the unused budget",
    "failed": "no line ran, and its task was given up on-chain when it failed (if still open), so its whole "
    "escrow is yours to withdraw (`market withdraw`)",
    "expired": "its deadline passed and its task expired on-chain, so its escrow is yours to withdraw "
    "(`market withdraw`)",
    "cancelled": "it is cancelled already",
}


def create_batch(
    session: Session,
    owner: str,
    *,
    input_file_id: str,
    endpoint: str,
    completion_window: str,
    metadata: dict[str, str] | None,
    task_id: int,
    task: Task | None,
    task_prices: TaskPrices | None,
    serving: Callable[[str], ServedModel | None],
    asking_price: int,
    max_window_h: int,
    now: int,
) -> Batch:
    """Stores a validating batch; `task` and `task_prices` are the on-chain task `task_id` and its prices
    (None: no such task), `serving` gives the model served under a name (None: none is). Only the
    task's owner can register it, so no one can take another wallet's task id; only an open task that
    commits to this file (its input root, line count, model, endpoint and completion window), so that
    nothing is found wrong after the money is locked; only if it pays at least `asking_price` per million
    input and output tokens; and only if its max price covers the most the file can cost at its prices (every
    prompt token and every line's max_tokens), so that the miners are paid in full for whatever they serve."""
    file = session.get(File, input_file_id)
    if file is None or file.owner != owner:
        raise NotFound("file", input_file_id)
    if file.purpose != "batch":
        raise InvalidInput(
            f"file {input_file_id} is a {file.purpose} file, not a batch input", "input_file_id"
        )
    if endpoint != file.endpoint:
        raise InvalidInput(f"the file's requests are for {file.endpoint}, not {endpoint}", "endpoint")
    hours = window_hours(completion_window, max_window_h)
    check_metadata(metadata)
    if task is None or task.status == TaskStatus.NONE:
        raise InvalidInput(f"task {task_id} does not exist on-chain: create and fund it first", "task_id")
    if task.owner.lower() != owner.lower():
        raise InvalidInput(
            f"task {task_id} belongs to {task.owner}, not to {owner}: register your own task",
            "task_id",
            "task_not_yours",
        )
    if task.status != TaskStatus.OPEN:
        message = f"task {task_id} is {task.status.name.lower()}, not open: fund a new task for this file"
        raise InvalidInput(message, "task_id", "task_not_open")
    served = serving(file.model or "")
    served_hash = served.model_hash if served is not None else b""
    mismatched = task_mismatches(task, owner, file, endpoint, completion_window, served_hash)
    if mismatched:
        raise InvalidInput(
            f"task {task_id} does not back this batch: its {', '.join(mismatched)} "
            f"{'differs' if len(mismatched) == 1 else 'differ'} from this batch's (the task must name this "
            "file's input root, line count and model, and this batch's endpoint and completion_window; the "
            "SDK's batches.fund_task makes such a task)",
            "completion_window" if mismatched == ["params"] else "task_id",
            "task_mismatch",
        )
    if (
        task_prices is not None
        and min(task_prices.input_per_million, task_prices.output_per_million) < asking_price
    ):
        paid = (format_amount(task_prices.input_per_million), format_amount(task_prices.output_per_million))
        raise InvalidInput(
            f"task {task_id} pays {paid[0]} per million input tokens and {paid[1]} per million output "
            f"tokens; this coordinator asks at least {format_amount(asking_price)} for each (GET /v1/prices)",
            "task_id",
            "price_too_low",
        )
    if task_prices is not None:
        check_covered(task_id, task_prices, task.max_price, file)
    batch = Batch(
        id=new_id("batch_"),
        owner=owner,
        input_file_id=file.id,
        endpoint=endpoint,
        model=file.model or "",
        completion_window=completion_window,
        metadata_=metadata,
        task_id=task_id,
        status="validating",
        created_at=now,
        expires_at=now + hours * 3600,
        request_total=file.line_count,
    )
    session.add(batch)
    try:
        session.flush()
    except IntegrityError as exc:
        raise InvalidInput(f"task {task_id} already has a batch", "task_id", "task_in_use") from exc
    return batch


def task_mismatches(
    task: Task, owner: str, file: File, endpoint: str, completion_window: str, model_hash: bytes
) -> list[str]:
    """What of the on-chain task does not back a batch of `file` by `owner` (empty when it all does);
    `model_hash` is the identity of the checkpoint served under the file's model name."""
    expected = {
        "owner": (task.owner.lower(), owner.lower()),
        "input root": ("0x" + bytes(task.input_root).hex(), file.input_root),
        "request count": (task.request_count, file.line_count),
        "model": (bytes(task.model_id), model_hash),
        "params": (bytes(task.params_hash), params_hash(endpoint, completion_window)),
    }
    return [name for name, (a, b) in expected.items() if a != b]


def check_covered(task_id: int, prices: TaskPrices, max_price: int, file: File) -> None:
    """Refuses a task whose max price is less than the most `file` can cost at `prices`: the payment is capped
    at the max price, so the miners would serve work they are not paid for."""
    input_tokens, output_tokens = file.input_tokens or 0, file.max_output_tokens or 0
    worst = prices.price(input_tokens, output_tokens)
    if worst > max_price:
        raise InvalidInput(
            f"task {task_id} escrows a max price of {format_amount(max_price)}, but this file can cost up to "
            f"{format_amount(worst)} ({input_tokens} input tokens and up to {output_tokens} output tokens at "
            f"the task's prices): fund a task with a max price of at least {format_amount(worst)}",
            "task_id",
            "underfunded",
        )


def window_hours(window: str, max_hours: int) -> int:
    match = re.fullmatch(r"([1-9][0-9]{0,3})h", window)
    if not match or int(match.group(1)) > max_hours:
        raise InvalidInput(
            f"completion_window must be whole hours from 1h to {max_hours}h, like '24h'", "completion_window"
        )
    return int(match.group(1))


def task_id_of(task_id: int | None, metadata: dict[str, str] | None) -> int:
    """The on-chain task a batch registers: `task_id`, else metadata's "task_id" (a decimal string, as
    openai-python sends it); both given, they must agree."""
    text = (metadata or {}).get(TASK_ID_KEY)
    from_metadata = None
    if text is not None:
        if not (text.isascii() and text.isdecimal() and len(text) <= 19 and 1 <= int(text) < 2**63):
            raise InvalidInput(f"metadata.task_id must be a decimal task id, not {text[:40]!r}", "metadata")
        from_metadata = int(text)
    if task_id is not None and from_metadata is not None and task_id != from_metadata:
        raise InvalidInput(f"task_id {task_id} and metadata.task_id {from_metadata} differ", "task_id")
    chosen = task_id if task_id is not None else from_metadata
    if chosen is None:
        raise InvalidInput(
            "name the on-chain task you funded for this file: task_id, or metadata.task_id (create it with "
            "the SDK's batches.fund_task)",
            "task_id",
        )
    return chosen


def check_metadata(metadata: dict[str, str] | None) -> None:
    if metadata is None:
        return
    if len(metadata) > MAX_METADATA_PAIRS:
        raise InvalidInput(f"metadata holds at most {MAX_METADATA_PAIRS} pairs", "metadata")
    for key, value in metadata.items():
        if len(key) > MAX_METADATA_KEY or not isinstance(value, str) or len(value) > MAX_METADATA_VALUE:
            raise InvalidInput(
                f"metadata keys are strings of at most {MAX_METADATA_KEY} characters and values of at most "
                f"{MAX_METADATA_VALUE}",
                "metadata",
            )


def get_batch(session: Session, owner: str, batch_id: str) -> Batch:
    batch = session.get(Batch, batch_id)
    if batch is None or batch.owner != owner:
        raise NotFound("batch", batch_id)
    return batch


def list_batches(session: Session, owner: str, limit: int, after: str | None) -> tuple[list[Batch], bool]:
    """The owner's batches, newest first, `limit` per page after the batch `after`; and whether more exist."""
    cursor = get_batch(session, owner, after) if after is not None else None
    return newest_first(session, select(Batch).where(Batch.owner == owner), Batch, cursor, limit)


def cancel_batch(session: Session, owner: str, batch_id: str, now: int) -> Batch:
    """Stops new work: a worker settles what was done and refunds the rest (status ends `cancelled`)."""
    batch = get_batch(session, owner, batch_id)
    if batch.status == "cancelling":
        return batch
    if batch.status not in CANCELLABLE:
        why = AFTER_THE_END.get(batch.status, "nothing is running")
        message = f"a batch that is {batch.status} cannot be cancelled: {why}"
        raise InvalidInput(message, None, "invalid_state")
    batch.status = "cancelling"
    batch.cancelling_at = now
    return batch


def usages(session: Session, batch_ids: list[str]) -> dict[str, tuple[int, int]]:
    """The input and output tokens of the lines served so far, per batch (absent: none yet)."""
    rows = session.execute(
        select(Result.batch_id, func.sum(Result.input_tokens), func.sum(Result.output_tokens))
        .where(Result.batch_id.in_(batch_ids))
        .group_by(Result.batch_id)
    )
    return {batch_id: (int(inputs or 0), int(outputs or 0)) for batch_id, inputs, outputs in rows}


def batch_view(session: Session, batch: Batch) -> dict[str, Any]:
    """`batch_object` of one batch, with its usage so far."""
    return batch_object(batch, usages(session, [batch.id]).get(batch.id, (0, 0)))


def batch_object(batch: Batch, tokens: tuple[int, int] = (0, 0)) -> dict[str, Any]:
    """The batch in OpenAI's shape, with `tokens` (input, output) served so far as its usage, plus our
    extensions: task_id, model, results_root, commit_tx and status_detail (why a batch is waiting, when it
    is)."""
    errors = {"object": "list", "data": batch.errors} if batch.errors else None
    inputs, outputs = tokens
    return {
        "id": batch.id,
        "object": "batch",
        "endpoint": batch.endpoint,
        "model": batch.model,
        "errors": errors,
        "input_file_id": batch.input_file_id,
        "completion_window": batch.completion_window,
        "status": batch.status,
        "output_file_id": batch.output_file_id,
        "error_file_id": batch.error_file_id,
        "created_at": batch.created_at,
        "in_progress_at": batch.in_progress_at,
        "expires_at": batch.expires_at,
        "finalizing_at": batch.finalizing_at,
        "completed_at": batch.completed_at,
        "failed_at": batch.failed_at,
        "expired_at": batch.expired_at,
        "cancelling_at": batch.cancelling_at,
        "cancelled_at": batch.cancelled_at,
        "request_counts": {
            "total": batch.request_total,
            "completed": batch.completed_count,
            "failed": batch.failed_count,
        },
        "metadata": batch.metadata_,
        "usage": {
            "input_tokens": inputs,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": outputs,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": inputs + outputs,
        },
        "task_id": batch.task_id,
        "results_root": batch.results_root,
        "commit_tx": batch.commit_tx,
        "status_detail": batch.status_detail,
    }


def commitment_object(session: Session, batch: Batch) -> dict[str, Any]:
    """What the SDK needs to check the results: the commitment committed on-chain and the miners' EIP-712
    signatures over it (empty until the batch reaches finalizing)."""
    signatures = session.scalars(
        select(Signature).where(Signature.batch_id == batch.id).order_by(Signature.miner)
    )
    return {
        "batch_id": batch.id,
        "task_id": batch.task_id,
        "commitment": batch.commitment,
        "signatures": [{"miner": s.miner, "signature": s.signature} for s in signatures],
    }
