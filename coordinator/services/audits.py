"""Random audits, the coordinator's part: it serves the one line the chain selected for a task's audit (the
request line with its proof in the task's input tree, and the result line with its Merkle proofs), so that
verifiers can re-score it. Only a sealed, selected draw's line is served: audits do not open the rest of a
user's batch to anyone."""

from __future__ import annotations

import json
from typing import Any, Protocol

from sqlalchemy import select
from sqlalchemy.orm import Session

from client_sdk.chain.types import Audit
from client_sdk.inputs import input_tree
from coordinator.db.models import Batch
from coordinator.services.dispatch import input_rows
from coordinator.services.errors import Conflict, NotFound
from coordinator.services.lifecycle import proven_line, result_trees


class AuditReader(Protocol):
    """The on-chain audit draws (client_sdk's Audits binding)."""

    def audit_of(self, task_id: int) -> Audit: ...


def audited_line(session: Session, audits: AuditReader, task_id: int) -> dict[str, Any]:
    audit = audits.audit_of(task_id)
    if not audit.sealed:
        raise Conflict(f"task {task_id}'s audit draw is not sealed on-chain", "audit_not_sealed")
    if not audit.selected:
        raise Conflict(f"task {task_id} was not selected for an audit", "audit_not_selected")
    batch = session.scalars(select(Batch).where(Batch.task_id == task_id, Batch.status != "failed")).first()
    if batch is None or batch.commitment is None:
        raise NotFound("committed batch of task", str(task_id))
    results, trees = result_trees(session, batch)
    position = audit.request_index
    result = results[position] if position < len(results) else None
    if result is None:
        raise NotFound(f"line {audit.request_index} of task", str(task_id))
    requests = [json.loads(row) for row in input_rows(session, batch.input_file_id)]
    return {
        "object": "audit.line",
        "task_id": task_id,
        "index": position,
        "request_line": requests[position],
        "input_proof": ["0x" + p.hex() for p in input_tree(requests).proof(position)],
        "result_line": proven_line(result, trees, position),
    }
