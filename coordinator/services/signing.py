"""Collecting the miners' signatures over a batch's result commitment. Each miner gets the commitment, the
lines it helped produce, a usage witness (the first leaf with its proof, from which any miner can check the
committed usage) and the work weights the miners' part was split by, checks them against what it saw, builds
its served root over its lines' leaves and signs both; a signature counts only if it recovers, with the served
root the coordinator computed for that miner, to the signer the miner registered on-chain."""

from __future__ import annotations

import json
from functools import partial
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from client_sdk.eip712 import ResultCommitment
from client_sdk.encoding import hex_bytes
from client_sdk.protocol.signing import SigningLine, SigningRequest
from client_sdk.results import ResultTrees
from coordinator.chain import CoordinatorChain
from coordinator.db.models import Batch, Result, Signature
from coordinator.services.dispatch import input_rows
from coordinator.services.errors import Conflict, InvalidInput, NotFound
from coordinator.services.lifecycle import Context, miner_weights, result_trees, serve_again
from coordinator.services.recent import Recent

# A commitment's results and trees do not change while it stands (serving lines again drops the results root
# with it): built once per commitment and process, not on every read by every miner still to sign.
_committed_trees: Recent[tuple[str, str | None], tuple[list[Result | None], ResultTrees]] = Recent(size=4)


def pending(session: Session, miner: str) -> list[dict[str, Any]]:
    """The commitments waiting for this miner's signature, as signing requests (client_sdk.protocol.signing):
    each with the lines it served (request line, result line, pipeline and Merkle proof), the usage witness,
    and the assigned miners with the work weights the miners' part of the payment was split by."""
    batches = session.scalars(
        select(Batch).where(Batch.status == "finalizing", Batch.commitment.is_not(None))
    ).all()
    # among these batches only: not every signature the miner ever gave
    ids = [batch.id for batch in batches]
    mine = select(Signature.batch_id).where(Signature.miner == miner, Signature.batch_id.in_(ids))
    signed = set(session.scalars(mine))
    out = []
    for batch in batches:
        if batch.commitment is None or miner not in (batch.miners or []) or batch.id in signed:
            continue
        results, trees = _committed_trees.get(
            (batch.id, batch.results_root), partial(result_trees, session, batch)
        )
        requests = input_rows(session, batch.input_file_id)
        lines = tuple(
            SigningLine(
                r.line_index,
                requests[r.line_index],
                json.loads(r.body),
                tuple(r.pipeline),
                tuple(trees.proof(i)),
            )
            for i, r in enumerate(results)
            if r is not None and miner in r.pipeline
        )
        request = SigningRequest(
            batch_id=batch.id,
            commitment=ResultCommitment.from_json(batch.task_id, batch.commitment),
            request_count=len(results),
            lines=lines,
            leaves=tuple(trees.leaves),
            witness=trees.leaves[0],  # any leaf's proof yields the tree's usage
            witness_proof=tuple(trees.proof(0)),
            miners=tuple(batch.miners or []),
            weights=tuple(miner_weights(results, batch.miners or [])),
        )
        out.append(request.to_json())
    return out


def accept(
    session: Session, chain: CoordinatorChain, miner: str, batch_id: str, signature: str, now: int
) -> None:
    batch = _signing(session, miner, batch_id)
    try:
        raw = hex_bytes(signature)
    except ValueError as exc:
        raise InvalidInput("signature must be hex", "signature") from exc
    assert batch.commitment is not None  # _signing checked it
    commitment = ResultCommitment.from_json(batch.task_id, batch.commitment)
    if len(raw) != 65 or not chain.check_signature(miner, raw, commitment):
        raise InvalidInput(
            "the signature is not over this commitment by the signer you accepted the task with (or you"
            " revoked that signer for this task)",
            "signature",
        )
    if session.get(Signature, (batch_id, miner)) is None:
        session.add(Signature(batch_id=batch_id, miner=miner, signature="0x" + raw.hex(), created_at=now))


def disown(session: Session, ctx: Context, miner: str, batch_id: str, lines: list[int], now: int) -> int:
    """A miner asked to sign has no record of serving `lines` (it crashed after a line left it but before it
    journaled the line): those lines are served again, on pipelines without it where there are any, and the
    commitment is made afresh. Only lines the commitment credits to this miner can be disowned. Returns how
    many lines are served again."""
    batch = _signing(session, miner, batch_id)
    credited = {
        r.line_index: r.pipeline
        for r in session.scalars(
            select(Result).where(Result.batch_id == batch_id, Result.line_index.in_(lines))
        )
    }
    for index in lines:
        if miner not in credited.get(index, []):
            raise InvalidInput(f"line {index} of batch {batch_id} is not credited to {miner}", "lines")
    reason = f"miner {miner} has no record of serving them (it restarted before it journaled them)"
    return serve_again(session, ctx, batch, sorted(set(lines)), {miner}, reason, now)


def _signing(session: Session, miner: str, batch_id: str) -> Batch:
    """The batch, locked (against its commitment changing meanwhile), if `miner` is assigned to it and it
    waits for signatures."""
    batch = session.get(Batch, batch_id, with_for_update=True)
    if batch is None or miner not in (batch.miners or []):
        raise NotFound("batch", batch_id)
    if batch.status != "finalizing" or batch.commitment is None:
        raise Conflict(f"batch {batch_id} is not waiting for signatures", "not_signing")
    return batch
