"""/v1/batches: create, retrieve, list, cancel (OpenAI's Batch API, plus the on-chain task id)."""

from __future__ import annotations

import time
from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from client_sdk.protocol.task import TaskStatus
from coordinator.api.auth import Caller
from coordinator.api.deps import AppSettings, DbSession
from coordinator.api.miners import Chain
from coordinator.api.schemas import ERRORS, BatchList, BatchObject
from coordinator.services import batches
from coordinator.services.pages import page_object

router = APIRouter(prefix="/v1/batches", tags=["batches"], responses=ERRORS)


class CreateBatch(BaseModel):
    input_file_id: str = Field(max_length=64)
    endpoint: str = Field(max_length=64)
    completion_window: str = Field(default="24h", max_length=8)
    metadata: dict[str, str] | None = Field(
        default=None,
        description='Up to 16 string pairs; "task_id" names the on-chain task when the body has no task_id '
        "(as openai-python sends it).",
    )
    task_id: int | None = Field(
        default=None,
        ge=1,
        lt=2**63,
        description="The on-chain task you created and funded for this file (the SDK's batches.fund_task).",
    )


@router.post(
    "",
    summary="Create a batch from an uploaded file and its funded on-chain task",
    response_model=BatchObject,
)
def create(
    body: CreateBatch, owner: Caller, db: DbSession, settings: AppSettings, chain: Chain
) -> dict[str, Any]:
    batches.check_metadata(body.metadata)
    task_id = batches.task_id_of(body.task_id, body.metadata)
    task = chain.task(task_id)
    exists = task.status != TaskStatus.NONE
    batch = batches.create_batch(
        db,
        owner,
        input_file_id=body.input_file_id,
        endpoint=body.endpoint,
        completion_window=body.completion_window,
        metadata=body.metadata,
        task_id=task_id,
        task=task if exists else None,
        task_prices=chain.market.tasks.prices_of(task_id) if exists else None,
        serving=settings.model,
        asking_price=settings.price_per_million_tokens,
        max_window_h=settings.max_completion_window_h,
        now=int(time.time()),
    )
    return batches.batch_object(batch)


@router.get("/{batch_id}", summary="Retrieve one of your batches", response_model=BatchObject)
def retrieve(batch_id: str, owner: Caller, db: DbSession) -> dict[str, Any]:
    batch = batches.get_batch(db, owner, batch_id)
    return batches.batch_view(db, batch)


@router.get("", summary="List your batches, newest first", response_model=BatchList)
def list_(
    owner: Caller,
    db: DbSession,
    limit: Annotated[int, Query()] = 20,
    after: Annotated[str | None, Query(max_length=64)] = None,
) -> dict[str, Any]:
    rows, has_more = batches.list_batches(db, owner, limit, after)
    used = batches.usages(db, [b.id for b in rows])
    return page_object([batches.batch_object(b, used.get(b.id, (0, 0))) for b in rows], has_more)


@router.post(
    "/{batch_id}/cancel",
    summary="Cancel a batch: finished requests are kept and paid, the rest refunded",
    response_model=BatchObject,
)
def cancel(batch_id: str, owner: Caller, db: DbSession) -> dict[str, Any]:
    batch = batches.cancel_batch(db, owner, batch_id, int(time.time()))
    return batches.batch_view(db, batch)


@router.get("/{batch_id}/commitment", summary="The result commitment and every miner's signature over it")
def commitment(batch_id: str, owner: Caller, db: DbSession) -> dict[str, Any]:
    return batches.commitment_object(db, batches.get_batch(db, owner, batch_id))
