"""/v1/audits/{task_id}: the line a task's random audit selected on-chain, for verifiers to re-score."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path

from coordinator.api.auth import Caller
from coordinator.api.deps import DbSession
from coordinator.api.miners import Chain
from coordinator.api.schemas import CONFLICT, ERRORS
from coordinator.services import audits

router = APIRouter(prefix="/v1/audits", tags=["disputes"], responses=ERRORS | CONFLICT)
TaskId = Annotated[int, Path(ge=1, lt=2**63, description="On-chain task id.")]


@router.get(
    "/{task_id}",
    summary="The request and result line (with its proof) a sealed, selected audit draw points at",
)
def audited_line(task_id: TaskId, _reader: Caller, db: DbSession, chain: Chain) -> dict[str, Any]:
    return audits.audited_line(db, chain.market.audits, task_id)
