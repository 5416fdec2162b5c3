"""/v1/disputes/{id}/evidence: the lines a dispute is about, published by anyone who has them (checked against
the chain), read by verifiers."""

from __future__ import annotations

import time
from typing import Annotated, Any

from fastapi import APIRouter, Path
from pydantic import BaseModel, Field

from coordinator.api.auth import Caller
from coordinator.api.deps import DbSession
from coordinator.api.miners import Chain
from coordinator.api.schemas import CONFLICT, ERRORS
from coordinator.services import disputes

router = APIRouter(prefix="/v1/disputes", tags=["disputes"], responses=ERRORS | CONFLICT)
DisputeId = Annotated[int, Path(ge=1, lt=2**63, description="On-chain dispute id.")]


class EvidenceBody(BaseModel):
    request_line: dict[str, Any] = Field(description="The disputed request, as in the batch input file.")
    result_line: dict[str, Any] = Field(
        description="The disputed output line, with its x_batchmarket fields."
    )
    reason: str | None = Field(default=None, max_length=2000)
    input_proof: list[Annotated[str, Field(pattern=r"^0x[0-9a-fA-F]{64}$")]] = Field(
        default_factory=list,
        max_length=64,
        description="The request line's Merkle proof in the task's input tree (hex words).",
    )


@router.post(
    "/{dispute_id}/evidence",
    summary="Publish a dispute's evidence (anyone; checked against the leaf on-chain; stored once)",
)
def publish(
    dispute_id: DisputeId, body: EvidenceBody, _publisher: Caller, db: DbSession, chain: Chain
) -> dict[str, Any]:
    proof = tuple(bytes.fromhex(word[2:]) for word in body.input_proof)
    evidence = disputes.Evidence(body.request_line, body.result_line, body.reason, proof)
    market = chain.market
    stored = disputes.publish(db, market.arbitration, market.tasks, dispute_id, evidence, int(time.time()))
    return disputes.evidence_object(stored)


@router.get("/{dispute_id}/evidence", summary="A dispute's evidence (any signed caller: verifiers read it)")
def read(dispute_id: DisputeId, _reader: Caller, db: DbSession) -> dict[str, Any]:
    return disputes.evidence_object(disputes.get_evidence(db, dispute_id))
