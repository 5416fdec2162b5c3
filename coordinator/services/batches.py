"""Batches as the user sees them: create, read, list, cancel, and their OpenAI-shaped representation."""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from client_sdk.chain.types import TaskPrices
from client_sdk.units import format_amount
from coordinator.db.models import Batch, File, Signature
from coordinator.services.errors import Conflict, InvalidInput, NotFound
from coordinator.services.ids import new_id

# OpenAI's statuses; the last four are final
CANCELLABLE = ("validating", "in_progress")
MAX_METADATA_PAIRS, MAX_METADATA_KEY, MAX_METADATA_VALUE = 16, 64, 512
MAX_LIST_LIMIT = 100


def create_batch(
    session: Session,
    owner: str,
    *,
    input_file_id: str,
    endpoint: str,
    completion_window: str,
    metadata: dict[str, str] | None,
    task_id: int,
    task_owner: str | None,
    task_prices: TaskPrices | None,
    asking_price: int,
    max_window_h: int,
    now: int,
) -> Batch:
    """Stores a validating batch; `task_owner` and `task_prices` are the on-chain owner and prices of
    `task_id` (None: no such task). Only the task's owner can register it, so no one can take another
    wallet's task id, and only if it pays at least `asking_price` per million input and output tokens."""
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
    if task_owner is None:
        raise InvalidInput(f"task {task_id} does not exist on-chain: create and fund it first", "task_id")
    if task_owner.lower() != owner.lower():
        raise InvalidInput(
            f"task {task_id} belongs to {task_owner}, not to {owner}: register your own task",
            "task_id",
            "task_not_yours",
        )
    if task_prices is not None and min(task_prices.as_tuple()) < asking_price:
        paid = (format_amount(task_prices.input_per_million), format_amount(task_prices.output_per_million))
        raise InvalidInput(
            f"task {task_id} pays {paid[0]} per million input tokens and {paid[1]} per million output "
            f"tokens; this coordinator asks at least {format_amount(asking_price)} for each (GET /v1/prices)",
            "task_id",
            "price_too_low",
        )
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
        raise Conflict(f"task {task_id} already has a batch", "task_in_use") from exc
    return batch


def window_hours(window: str, max_hours: int) -> int:
    match = re.fullmatch(r"([1-9][0-9]{0,3})h", window)
    if not match or int(match.group(1)) > max_hours:
        raise InvalidInput(
            f"completion_window must be whole hours from 1h to {max_hours}h, like '24h'", "completion_window"
        )
    return int(match.group(1))


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
    if not 1 <= limit <= MAX_LIST_LIMIT:
        raise InvalidInput(f"limit must be from 1 to {MAX_LIST_LIMIT}", "limit")
    query = select(Batch).where(Batch.owner == owner)
    if after is not None:
        cursor = get_batch(session, owner, after)
        query = query.where(
            (Batch.created_at < cursor.created_at)
            | ((Batch.created_at == cursor.created_at) & (Batch.id < cursor.id))
        )
    rows = session.scalars(query.order_by(Batch.created_at.desc(), Batch.id.desc()).limit(limit + 1)).all()
    return list(rows[:limit]), len(rows) > limit


def cancel_batch(session: Session, owner: str, batch_id: str, now: int) -> Batch:
    """Stops new work: a worker settles what was done and refunds the rest (status ends `cancelled`)."""
    batch = get_batch(session, owner, batch_id)
    if batch.status == "cancelling":
        return batch
    if batch.status not in CANCELLABLE:
        raise Conflict(f"a batch that is {batch.status} cannot be cancelled", "invalid_state")
    batch.status = "cancelling"
    batch.cancelling_at = now
    return batch


def batch_object(batch: Batch) -> dict[str, Any]:
    """The batch in OpenAI's shape, plus our extensions: task_id, model, results_root, commit_tx and
    status_detail (why a batch is waiting, when it is)."""
    errors = {"object": "list", "data": batch.errors} if batch.errors else None
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
