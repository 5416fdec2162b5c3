"""Dispute evidence: the request line and the result line a dispute is about, published by its challenger so
that verifiers can re-score them. The chain holds only the disputed leaf's hash, so evidence is stored only if
the two lines hash back to it: nobody, the challenger included, can swap a line afterwards."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Protocol

from eth_abi.exceptions import EncodingError
from sqlalchemy.orm import Session

from client_sdk.chain.types import Dispute, DisputeStatus
from client_sdk.inputs import canonical_json
from client_sdk.results import PROOF_KEY
from client_sdk.verify import result_leaf
from coordinator.db.models import DisputeEvidence
from coordinator.services.errors import Conflict, InvalidInput, NotFound


class DisputeReader(Protocol):
    """The on-chain dispute records (client_sdk's Arbitration binding)."""

    def get_dispute(self, dispute_id: int) -> Dispute: ...


@dataclass(frozen=True)
class Evidence:
    request_line: dict[str, Any]
    result_line: dict[str, Any]
    reason: str | None = None


def check_evidence(dispute_id: int, record: Dispute, evidence: Evidence) -> None:
    """Raises InvalidInput unless the lines are exactly the disputed leaf's."""
    try:
        leaf = result_leaf(record.task_id, evidence.request_line, evidence.result_line)
        claimed_input_hash = bytes.fromhex(
            str(evidence.result_line[PROOF_KEY]["input_hash"]).removeprefix("0x")
        )
        leaf_hash = leaf.hash()  # the ABI encoding also range-checks the numbers
    except (KeyError, TypeError, ValueError, EncodingError) as exc:
        raise InvalidInput(
            f"the result line's {PROOF_KEY} fields are missing or malformed ({exc!s})", "result_line"
        ) from exc
    if leaf.request_index != record.request_index:
        raise InvalidInput(
            f"dispute {dispute_id} is about line {record.request_index}, not line {leaf.request_index}",
            "result_line",
        )
    if leaf.input_hash != claimed_input_hash:
        raise InvalidInput(
            "the request line does not hash to the input hash of the disputed leaf", "request_line"
        )
    if leaf_hash != record.leaf_hash:
        raise InvalidInput(
            f"the result line does not hash to dispute {dispute_id}'s leaf on-chain", "result_line"
        )


def publish(
    session: Session,
    disputes: DisputeReader,
    caller: str,
    dispute_id: int,
    evidence: Evidence,
    now: int,
) -> DisputeEvidence:
    """Stores the evidence of an open dispute, sent by its challenger or its opener (for an audit, the
    verifier that opened it), once (the same again is a no-op)."""
    record = disputes.get_dispute(dispute_id)
    if record.status == DisputeStatus.NONE:
        raise NotFound("dispute", str(dispute_id))
    if record.status != DisputeStatus.OPEN:
        raise Conflict(
            f"dispute {dispute_id} is {record.status.name.lower()}: evidence is taken only while it is open",
            "dispute_not_open",
        )
    # an audit's challenger is the task owner, who did not open it: the verifier that did publishes
    if caller not in (record.challenger, record.opener):
        who = f"its opener {record.opener}" if record.audit else f"its challenger {record.challenger}"
        raise Conflict(f"only {who} can publish dispute {dispute_id}'s evidence", "not_challenger")
    check_evidence(dispute_id, record, evidence)
    request_text = canonical_json(evidence.request_line).decode()
    result_text = canonical_json(evidence.result_line).decode()
    stored = session.get(DisputeEvidence, dispute_id)
    if stored is not None:
        if (stored.request_line, stored.result_line, stored.reason) != (
            request_text,
            result_text,
            evidence.reason,
        ):
            raise Conflict(
                f"the evidence of dispute {dispute_id} is already published and cannot change",
                "evidence_published",
            )
        return stored
    stored = DisputeEvidence(
        dispute_id=dispute_id,
        task_id=record.task_id,
        challenger=record.challenger,
        leaf_hash="0x" + record.leaf_hash.hex(),
        request_line=request_text,
        result_line=result_text,
        reason=evidence.reason,
        created_at=now,
    )
    session.add(stored)
    return stored


def get_evidence(session: Session, dispute_id: int) -> DisputeEvidence:
    stored = session.get(DisputeEvidence, dispute_id)
    if stored is None:
        raise NotFound("evidence for dispute", str(dispute_id))
    return stored


def evidence_object(stored: DisputeEvidence) -> dict[str, Any]:
    return {
        "object": "dispute.evidence",
        "dispute_id": stored.dispute_id,
        "task_id": stored.task_id,
        "challenger": stored.challenger,
        "leaf_hash": stored.leaf_hash,
        "request_line": json.loads(stored.request_line),
        "result_line": json.loads(stored.result_line),
        "reason": stored.reason,
        "created_at": stored.created_at,
    }
