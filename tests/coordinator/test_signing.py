"""The coordinator takes a miner's signature over a result commitment only if it recovers to the signer the
miner registered on-chain, over exactly this batch's commitment (so neither a forged nor a replayed one)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from eth_account import Account
from eth_account.signers.local import LocalAccount

from client_sdk.chain.contracts import Market
from client_sdk.eip712 import ResultCommitment, sign_commitment
from coordinator.chain import CoordinatorChain, Parties, Slots
from coordinator.db.migrate import upgrade
from coordinator.db.models import Batch, File, Signature
from coordinator.db.session import Database
from coordinator.services import signing
from coordinator.services.errors import Conflict, InvalidInput, NotFound
from demo.lifecycle import DemoConfig
from tests.helpers import assigned_task

COMMITMENT = {
    "results_root": "0x" + "ab" * 32,
    "input_tokens": 100,
    "output_tokens": 50,
    "payment": 3_000,
    "miner_amounts": [2_850],
    "served_roots": ["0x" + "cd" * 32],
}


@pytest.fixture
def database(tmp_path: Path) -> Database:
    url = f"sqlite:///{tmp_path / 'c.db'}"
    upgrade(url)
    return Database(url)


def add_batch(
    database: Database, batch_id: str, task_id: int, miner: str, status: str = "finalizing"
) -> None:
    with database.session() as session:
        file_id = f"file-{batch_id}"
        session.add(
            File(id=file_id, owner=miner, purpose="batch", filename="in", bytes=1, created_at=0, line_count=1)
        )
        session.flush()  # no ORM relationship orders the inserts
        session.add(
            Batch(
                id=batch_id, owner=miner, input_file_id=file_id, endpoint="/v1/chat/completions", model="m",
                completion_window="24h", task_id=task_id, status=status, created_at=0, expires_at=1,
                request_total=1, miners=[miner],
                commitment=COMMITMENT | {"miners": [miner], "request_count": DemoConfig().requests},
            )
        )  # fmt: skip


def signature_for(account: LocalAccount, market: Market, database: Database, batch_id: str) -> str:
    with database.session() as session:
        batch = session.get(Batch, batch_id)
        assert batch is not None
        commitment = ResultCommitment.from_json(batch.task_id, batch.commitment)
        (miner,) = batch.miners or []  # the batch's one miner
    chain_id, registry = market.w3.eth.chain_id, market.deployment.task_registry
    signed = sign_commitment(account, commitment, miner, chain_id, registry)
    return "0x" + signed.hex()


def test_only_this_batchs_commitment_signed_by_the_accepting_signer_counts(
    admin_market: Market, accounts: list[LocalAccount], database: Database
) -> None:
    miner = accounts[3]
    coordinator, user = accounts[1], accounts[2]
    chain = CoordinatorChain(admin_market)
    add_batch(database, "batch_a", assigned_task(admin_market, coordinator, user, [miner]), miner.address)
    add_batch(database, "batch_b", assigned_task(admin_market, coordinator, user, [miner]), miner.address)
    # a signer registered after the miner accepted the tasks signs none of their commitments
    rotated = Account.create()
    admin_market.as_account(miner).registry.set_signer(rotated.address)

    forged = signature_for(rotated, admin_market, database, "batch_a")
    replayed = signature_for(miner, admin_market, database, "batch_b")  # valid, but for another task
    with database.session() as s:
        batch_a = s.get(Batch, "batch_a")
        assert batch_a is not None
        commitment = ResultCommitment.from_json(batch_a.task_id, batch_a.commitment)
    chain_id, registry = admin_market.w3.eth.chain_id, admin_market.deployment.task_registry
    # the miner's signature over a served root other than the one the coordinator computed for it
    other = replace(commitment, served_roots=(bytes(32),))
    other_root = "0x" + sign_commitment(miner, other, miner.address, chain_id, registry).hex()
    for bad in (forged, replayed, other_root):
        with (
            pytest.raises(InvalidInput, match="not over this commitment by the signer you accepted the task"),
            database.session() as s,
        ):
            signing.accept(s, chain, miner.address, "batch_a", bad, now=0)
    with pytest.raises(InvalidInput, match="signature must be hex"), database.session() as s:
        signing.accept(s, chain, miner.address, "batch_a", "0xzz", now=0)

    good = signature_for(miner, admin_market, database, "batch_a")
    with database.session() as s:
        signing.accept(s, chain, miner.address, "batch_a", good, now=0)
        signing.accept(s, chain, miner.address, "batch_a", good, now=0)  # again: stored once
    with database.session() as s:
        assert [(x.miner, x.signature) for x in s.query(Signature).all()] == [(miner.address, good)]

    with pytest.raises(NotFound), database.session() as s:
        signing.accept(s, chain, accounts[4].address, "batch_a", good, now=0)  # not a miner of this batch


def test_a_batch_not_collecting_signatures_refuses_them(
    admin_market: Market, accounts: list[LocalAccount], database: Database
) -> None:
    miner = accounts[3]
    add_batch(database, "batch_c", 3, miner.address, status="in_progress")
    with pytest.raises(Conflict, match="is not waiting for signatures"), database.session() as s:
        signing.accept(s, CoordinatorChain(admin_market), miner.address, "batch_c", "0x00", now=0)


def test_a_signer_its_miner_revoked_signs_nothing_and_a_vouch_carries_the_slot(
    admin_market: Market, accounts: list[LocalAccount], database: Database
) -> None:
    """The miner's account revokes the signer it accepted the task with: the coordinator refuses that key's
    signature for the task (the contract would), counts the miner among those no signature can carry, and
    once the account vouches on-chain for exactly this commitment, among those an empty signature carries (a
    vouch for other results is told apart: the contract would refuse to leave that miner out)."""
    miner, coordinator, user = accounts[3], accounts[1], accounts[2]
    chain = CoordinatorChain(admin_market)
    task_id = assigned_task(admin_market, coordinator, user, [miner])
    add_batch(database, "batch_r", task_id, miner.address)
    good = signature_for(miner, admin_market, database, "batch_r")
    with database.session() as s:
        batch = s.get(Batch, "batch_r")
        assert batch is not None
        commitment = ResultCommitment.from_json(batch.task_id, batch.commitment)
    assert chain.slots(commitment, chain.parties(task_id)) == Slots(set(), set(), set())
    assert chain.parties(task_id) == Parties((miner.address,), (miner.address,), 0)

    admin_market.as_account(miner).tasks.revoke_signer(task_id)
    with (
        pytest.raises(InvalidInput, match="not over this commitment by the signer you accepted"),
        database.session() as s,
    ):
        signing.accept(s, chain, miner.address, "batch_r", good, now=0)
    assert chain.slots(commitment, chain.parties(task_id)) == Slots({miner.address.lower()}, set(), set())
    assert chain.parties(task_id).revoked_mask == 1

    other = replace(commitment, output_tokens=commitment.output_tokens + 1)
    admin_market.as_account(miner).tasks.vouch_results(other)  # its own account, not the revoked key
    me = miner.address.lower()
    assert chain.slots(commitment, chain.parties(task_id)) == Slots({me}, set(), {me})
    admin_market.as_account(miner).tasks.vouch_results(commitment)  # a later vouch replaces the earlier one
    assert chain.slots(commitment, chain.parties(task_id)) == Slots(set(), {miner.address.lower()}, set())
