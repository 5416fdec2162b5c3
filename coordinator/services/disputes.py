"""Dispute evidence: the request line and the result line a dispute is about, published so that verifiers can
re-score them. Anyone may publish it (the owner, the opener, a verifier following an audit): whoever opened a
dispute must not be able to keep the jurors blind by keeping quiet. The chain holds only the disputed leaf's
hash and the task's input root, so evidence is stored only if the result line hashes back to the leaf and the
request line is proven to be the input line at the leaf's position: nobody can swap a line afterwards. The
request line need not be the one the leaf claims to answer: a leaf bound to another request is itself the
fault."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Protocol

from eth_abi.exceptions import EncodingError
from sqlalchemy.orm import Session

from client_sdk.chain.types import Dispute, DisputeStatus
from client_sdk.inputs import canonical_json
from client_sdk.protocol.task import Task
from client_sdk.results import PROOF_KEY
from client_sdk.verify import is_input_line, result_leaf
from coordinator.db.models import DisputeEvidence
from coordinator.services.errors import Conflict, InvalidInput, NotFound


class DisputeReader(Protocol):
    """The on-chain dispute records (client_sdk's Arbitration binding)."""

    def get_dispute(self, dispute_id: int) -> Dispute: ...


class TaskReader(Protocol):
    """The on-chain task records (client_sdk's TaskRegistry binding)."""

    def get_task(self, task_id: int) -> Task: ...


@dataclass(frozen=True)
class Evidence:
    request_line: dict[str, Any]
    result_line: dict[str, Any]
    reason: str | None = None
    input_proof: tuple[bytes, ...] = ()  # the request line's proof in the task's input tree


def check_evidence(dispute_id: int, record: Dispute, evidence: Evidence, input_root: bytes) -> None:
    """Raises InvalidInput unless the result line is exactly the disputed leaf's and the request line is the
    task's input line at its position."""
    try:
        leaf = result_leaf(record.task_id, evidence.result_line)
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
    if not is_input_line(input_root, leaf.request_index, evidence.request_line, evidence.input_proof):
        raise InvalidInput(
            f"the request line is not line {leaf.request_index} of the task's input (its input proof fails)",
            "input_proof",
        )
    if leaf_hash != record.leaf_hash:
        raise InvalidInput(
            f"the result line does not hash to dispute {dispute_id}'s leaf on-chain", "result_line"
        )


def publish(
    session: Session,
    disputes: DisputeReader,
    tasks: TaskReader,
    dispute_id: int,
    evidence: Evidence,
    now: int,
) -> DisputeEvidence:
    """Stores the evidence of an open dispute, sent by anyone, once: the lines are checked against the chain,
    so they can only be the disputed ones; the same lines again (whatever their reason) are a no-op."""
    record = disputes.get_dispute(dispute_id)
    if record.status == DisputeStatus.NONE:
        raise NotFound("dispute", str(dispute_id))
    if record.status != DisputeStatus.OPEN:
        raise Conflict(
            f"dispute {dispute_id} is {record.status.name.lower()}: evidence is taken only while it is open",
            "dispute_not_open",
        )
    check_evidence(dispute_id, record, evidence, tasks.get_task(record.task_id).input_root)
    request_text = canonical_json(evidence.request_line).decode()
    result_text = canonical_json(evidence.result_line).decode()
    input_proof = ["0x" + p.hex() for p in evidence.input_proof]
    stored = session.get(DisputeEvidence, dispute_id)
    if stored is not None:
        if (stored.request_line, stored.result_line, stored.input_proof) != (
            request_text,
            result_text,
            input_proof,
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
        input_proof=input_proof,
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
        "input_proof": stored.input_proof or [],
        "reason": stored.reason,
        "created_at": stored.created_at,
    }
