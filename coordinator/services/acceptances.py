"""Miners' consent to a batch's stake locks. The worker proposes an assignment (miners, stake lock, expiry in
chain time); each miner's node reads the proposals that name it, checks the task on-chain against its own
policy and signs `AcceptTask`; a signature counts only if it recovers to the signer the miner registered. The
task is assigned on-chain with every proposed miner's acceptance, or proposed afresh once the proposal
expires."""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from client_sdk import eip712
from client_sdk.encoding import hex_bytes
from coordinator.chain import CoordinatorChain
from coordinator.db.models import Acceptance, Batch, File
from coordinator.services.errors import Conflict, InvalidInput, NotFound

# How long miners have to accept (chain seconds): their nodes poll every half second, so a live one answers
# within a few; one that does not is not waited for longer than this.
ACCEPT_WINDOW_S = 120


def propose(session: Session, batch: Batch, miners: list[str], stake_lock: int, chain_now: int) -> None:
    """Offers the assignment to `miners`; acceptances of an earlier proposal no longer count."""
    session.execute(delete(Acceptance).where(Acceptance.batch_id == batch.id))
    batch.proposal = {"miners": miners, "stake_lock": stake_lock, "expiry": chain_now + ACCEPT_WINDOW_S}


def collected(session: Session, batch: Batch) -> list[eip712.Acceptance] | None:
    """Every proposed miner's acceptance, in proposal order; None while one is missing."""
    assert batch.proposal is not None
    rows = {a.miner: a for a in session.scalars(select(Acceptance).where(Acceptance.batch_id == batch.id))}
    miners: list[str] = batch.proposal["miners"]
    if any(m not in rows for m in miners):
        return None
    return [eip712.Acceptance(rows[m].expiry, hex_bytes(rows[m].signature)) for m in miners]


def pending(session: Session, miner: str) -> list[dict[str, Any]]:
    """The proposals naming this miner that it has not accepted yet, each with what its batch can cost at most
    in tokens (its file's prompt tokens and every line's max_tokens), which the miner's consent prices."""
    rows = session.execute(
        select(Batch, File.input_tokens, File.max_output_tokens)
        .join(File, File.id == Batch.input_file_id)
        .where(Batch.status == "validating", Batch.proposal.is_not(None))
    ).all()
    # among these batches only: not every acceptance the miner ever gave
    ids = [batch.id for batch, _, _ in rows]
    accepted = set(
        session.scalars(
            select(Acceptance.batch_id).where(Acceptance.miner == miner, Acceptance.batch_id.in_(ids))
        )
    )
    return [
        {
            "batch_id": b.id,
            "task_id": b.task_id,
            "stake_lock": b.proposal["stake_lock"],
            "expiry": b.proposal["expiry"],
            "input_tokens": input_tokens,
            "max_output_tokens": max_output_tokens,
        }
        for b, input_tokens, max_output_tokens in rows
        if b.proposal is not None and miner in b.proposal["miners"] and b.id not in accepted
    ]


def accept(
    session: Session, chain: CoordinatorChain, miner: str, batch_id: str, signature: str, now: int
) -> None:
    """Stores the miner's acceptance of the batch's current proposal, once it checks out."""
    batch = session.get(Batch, batch_id)
    proposal = batch.proposal if batch is not None else None
    if batch is None or proposal is None or miner not in proposal["miners"]:
        raise NotFound("assignment proposal for batch", batch_id)
    if batch.status != "validating":
        raise Conflict(f"batch {batch_id} is {batch.status}: it takes no acceptances", "not_proposing")
    if chain.now() > proposal["expiry"]:
        raise Conflict(f"the proposal of batch {batch_id} has expired", "proposal_expired")
    try:
        raw = hex_bytes(signature)
    except ValueError as exc:
        raise InvalidInput("signature must be hex", "signature") from exc
    acceptance = eip712.Acceptance(int(proposal["expiry"]), raw)
    if len(raw) != 65 or not chain.check_acceptance(miner, acceptance, batch.task_id, proposal["stake_lock"]):
        raise InvalidInput(
            "the signature is not your registered signer's acceptance of this task and stake lock",
            "signature",
        )
    if session.get(Acceptance, (batch_id, miner)) is None:
        session.add(
            Acceptance(
                batch_id=batch_id,
                miner=miner,
                expiry=acceptance.expiry,
                signature="0x" + raw.hex(),
                created_at=now,
            )
        )
