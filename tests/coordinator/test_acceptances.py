"""The coordinator locks no stake without consent: a proposed assignment waits for every named miner's
acceptance, and an acceptance counts only if it is the miner's registered signer's, for exactly this task and
stake lock, before the proposal expires."""

from __future__ import annotations

from pathlib import Path

import pytest
from eth_account import Account
from eth_account.signers.local import LocalAccount

from client_sdk.chain.anvil import Anvil
from client_sdk.chain.contracts import Market
from client_sdk.eip712 import sign_acceptance
from coordinator.chain import CoordinatorChain
from coordinator.db.migrate import upgrade
from coordinator.db.models import Acceptance, Batch, File
from coordinator.db.session import Database
from coordinator.services import acceptances
from coordinator.services.errors import Conflict, InvalidInput, NotFound
from tests.coordinator.helpers import stored_batch
from tests.helpers import register_miner

TASK, LOCK = 7, 10 * 10**6


@pytest.fixture
def database(tmp_path: Path) -> Database:
    url = f"sqlite:///{tmp_path / 'c.db'}"
    upgrade(url)
    return Database(url)


def proposed(database: Database, market: Market, miners: list[str]) -> tuple[str, int]:
    """A validating batch whose assignment is proposed to `miners`: its id and the proposal's expiry."""
    with database.session() as session:
        batch = stored_batch(session, miners[0], 1, 0, status="validating", task_id=TASK)
        acceptances.propose(session, batch, miners, LOCK, market.chain_time())
        return batch.id, int(batch.proposal["expiry"])  # type: ignore[index]


def signed(
    market: Market,
    signer: LocalAccount,
    expiry: int,
    task: int = TASK,
    lock: int = LOCK,
    miner: str | None = None,
) -> str:
    """`signer`'s acceptance for `miner` (itself unless given)."""
    chain_id, registry = market.w3.eth.chain_id, market.deployment.task_registry
    named = signer.address if miner is None else miner
    return "0x" + sign_acceptance(signer, task, named, lock, expiry, chain_id, registry).signature.hex()


def accept(database: Database, market: Market, batch_id: str, miner: str, signature: str) -> None:
    with database.session() as session:
        acceptances.accept(session, CoordinatorChain(market), miner, batch_id, signature, now=0)


def test_a_proposal_says_what_its_batch_can_cost_at_most_in_tokens(
    admin_market: Market, accounts: list[LocalAccount], database: Database
) -> None:
    """The counts the miner's consent prices against the task's maximum price: its file's."""
    miner = accounts[3]
    batch_id, expiry = proposed(database, admin_market, [miner.address])
    with database.session() as session:
        file = session.get(File, session.get(Batch, batch_id).input_file_id)  # type: ignore[union-attr]
        assert file is not None
        file.input_tokens, file.max_output_tokens = 1_234, 56_789
    with database.session() as session:
        assert acceptances.pending(session, miner.address) == [
            {"batch_id": batch_id, "task_id": TASK, "stake_lock": LOCK, "expiry": expiry,
             "input_tokens": 1_234, "max_output_tokens": 56_789},
        ]  # fmt: skip


def test_only_each_named_miners_consent_to_this_task_and_lock_counts(
    admin_market: Market, accounts: list[LocalAccount], database: Database
) -> None:
    first, second = accounts[3], accounts[4]
    for miner in (first, second):
        register_miner(admin_market, miner, 200 * 10**6)
    batch_id, expiry = proposed(database, admin_market, [first.address, second.address])
    with database.session() as session:
        assert [p["batch_id"] for p in acceptances.pending(session, first.address)] == [batch_id]
        assert acceptances.pending(session, accounts[5].address) == []

    bad = {
        "a stranger's key": signed(admin_market, Account.create(), expiry),
        "another task": signed(admin_market, first, expiry, task=TASK + 1),
        "a larger lock": signed(admin_market, first, expiry, lock=LOCK + 1),
        "another expiry": signed(admin_market, first, expiry + 1),
        "another miner's": signed(admin_market, first, expiry, miner=second.address),
    }
    for signature in bad.values():
        with pytest.raises(InvalidInput, match="not your registered signer's acceptance"):
            accept(database, admin_market, batch_id, first.address, signature)
    with pytest.raises(InvalidInput, match="signature must be hex"):
        accept(database, admin_market, batch_id, first.address, "0xzz")
    with pytest.raises(NotFound):
        accept(
            database, admin_market, batch_id, accounts[5].address, signed(admin_market, accounts[5], expiry)
        )

    accept(database, admin_market, batch_id, first.address, signed(admin_market, first, expiry))
    accept(
        database, admin_market, batch_id, first.address, signed(admin_market, first, expiry)
    )  # again: stored once
    with database.session() as session:
        batch = session.get(Batch, batch_id)
        assert batch is not None
        assert acceptances.collected(session, batch) is None  # the second miner has not accepted
        assert acceptances.pending(session, first.address) == []
    accept(database, admin_market, batch_id, second.address, signed(admin_market, second, expiry))
    with database.session() as session:
        batch = session.get(Batch, batch_id)
        assert batch is not None
        collected = acceptances.collected(session, batch)
        assert collected is not None and [a.expiry for a in collected] == [expiry, expiry]
        assert session.query(Acceptance).count() == 2


def test_an_expired_or_renewed_proposal_takes_no_old_consent(
    admin_market: Market, accounts: list[LocalAccount], database: Database, chain: Anvil
) -> None:
    miner = accounts[3]
    register_miner(admin_market, miner, 200 * 10**6)
    batch_id, expiry = proposed(database, admin_market, [miner.address])
    accept(database, admin_market, batch_id, miner.address, signed(admin_market, miner, expiry))
    with database.session() as session:
        batch = session.get(Batch, batch_id)
        assert batch is not None
        acceptances.propose(session, batch, [miner.address], LOCK, admin_market.chain_time() + 1)
        assert acceptances.collected(session, batch) is None  # renewed: the old acceptance no longer counts
        renewed = int(batch.proposal["expiry"])  # type: ignore[index]
    chain.advance_time(acceptances.ACCEPT_WINDOW_S + 2)
    with pytest.raises(Conflict, match="has expired"):
        accept(database, admin_market, batch_id, miner.address, signed(admin_market, miner, renewed))
