"""A batch cancelled through the API alone (as openai-python does) before any line was served never strands
its escrow: the worker releases the task on-chain, at once while no miner was assigned, after the contract's
notice once miners were (time for miners that served and signed to vouch for it), and the owner's whole max
price is back in its balance, to the unit, with every assigned miner's stake unlocked. An account that is not
the task's coordinator cannot release it, a task released once is not released again, and a task its miners
vouched for is never released: they commit it."""

from __future__ import annotations

from pathlib import Path

import pytest
from eth_account.signers.local import LocalAccount
from redis import Redis

from client_sdk.chain.anvil import Anvil
from client_sdk.chain.contracts import Market
from client_sdk.errors import ContractRevert
from client_sdk.protocol.task import TaskStatus
from coordinator.chain import CoordinatorChain
from coordinator.config import Settings
from coordinator.db.migrate import upgrade
from coordinator.db.models import Batch
from coordinator.db.session import Database
from coordinator.services.lifecycle import Context, advance
from coordinator.services.live import LiveMembership
from demo.lifecycle import DemoConfig, create_task
from tests.coordinator.helpers import stored_batch
from tests.helpers import assigned_task, honest_results


def _cancelled_batch(database: Database, owner: str, task_id: int, requests: int) -> str:
    with database.session() as session:
        return stored_batch(session, owner, requests, 0, status="cancelled", task_id=task_id).id


def _context(market: Market, redis_url: str) -> Context:
    return Context(Settings(), CoordinatorChain(market), LiveMembership(Redis.from_url(redis_url), 10))


@pytest.fixture
def database(tmp_path: Path) -> Database:
    url = f"sqlite:///{tmp_path / 'c.db'}"
    upgrade(url)
    return Database(url)


def test_a_cancelled_unassigned_batch_releases_its_task_at_once(
    admin_market: Market, accounts: list[LocalAccount], database: Database, redis_url: str
) -> None:
    coordinator, user, config = accounts[1], accounts[2], DemoConfig()
    admin_market.token.mint(user.address, config.max_price)
    task_id = create_task(admin_market.as_account(user), config)
    batch_id = _cancelled_batch(database, user.address, task_id, config.requests)
    ctx = _context(admin_market.as_account(coordinator), redis_url)

    with database.session() as session:
        assert advance(session, ctx, batch_id) == "cancelled"
        batch = session.get(Batch, batch_id)
        assert batch is not None and batch.finalized
    assert admin_market.tasks.get_task(task_id).status == TaskStatus.CANCELLED
    assert admin_market.escrow.escrow_of(task_id) == 0
    assert admin_market.escrow.balance_of(user.address) == config.max_price
    with database.session() as session:  # a second step does nothing more
        assert advance(session, ctx, batch_id) == "cancelled"
    assert admin_market.escrow.balance_of(user.address) == config.max_price
    database.dispose()


def test_a_cancelled_batch_whose_miners_served_nothing_releases_their_stake_and_the_escrow(
    chain: Anvil, admin_market: Market, accounts: list[LocalAccount], database: Database, redis_url: str
) -> None:
    coordinator, user, miners, config = accounts[1], accounts[2], accounts[3:5], DemoConfig()
    task_id = assigned_task(admin_market, coordinator, user, miners)
    for miner in miners:
        assert admin_market.registry.stake_of(miner.address).locked == config.stake_lock
    batch_id = _cancelled_batch(database, user.address, task_id, config.requests)

    rival = _context(admin_market, redis_url)  # the admin is not a coordinator
    with database.session() as session, pytest.raises(ContractRevert):
        advance(session, rival, batch_id)
    assert admin_market.tasks.get_task(task_id).status == TaskStatus.ASSIGNED

    ctx = _context(admin_market.as_account(coordinator), redis_url)
    with database.session() as session:  # the release is asked for; it waits out the notice
        assert advance(session, ctx, batch_id) == "cancelled"
    notice = admin_market.tasks.release_notice()
    assert admin_market.tasks.release_at_of(task_id) == admin_market.chain_time() + notice
    chain.advance_time(notice - 2)
    with database.session() as session:
        advance(session, ctx, batch_id)
    assert admin_market.tasks.get_task(task_id).status == TaskStatus.ASSIGNED
    chain.advance_time(2)
    with database.session() as session:
        assert advance(session, ctx, batch_id) == "cancelled"
    assert admin_market.tasks.get_task(task_id).status == TaskStatus.CANCELLED
    assert admin_market.escrow.balance_of(user.address) == config.max_price
    for miner in miners:
        stake = admin_market.registry.stake_of(miner.address)
        assert (stake.free, stake.locked) == (config.miner_stake, 0)
        assert admin_market.escrow.balance_of(miner.address) == 0
    database.dispose()


def test_a_cancelled_batch_whose_miners_vouched_for_results_is_committed_by_them_not_released(
    chain: Anvil, admin_market: Market, accounts: list[LocalAccount], database: Database, redis_url: str
) -> None:
    """The coordinator (with the owner) cancels after the miners served and signed: they vouch on-chain during
    the notice, the release never goes through, and a miner commits what they all vouched for."""
    coordinator, user, miners, config = accounts[1], accounts[2], accounts[3:5], DemoConfig()
    task_id = assigned_task(admin_market, coordinator, user, miners)
    batch_id = _cancelled_batch(database, user.address, task_id, config.requests)
    ctx = _context(admin_market.as_account(coordinator), redis_url)
    with database.session() as session:
        advance(session, ctx, batch_id)
    _, commitment = honest_results(admin_market, task_id, miners)
    for miner in miners:
        admin_market.as_account(miner).tasks.vouch_results(commitment)
    chain.advance_time(admin_market.tasks.release_notice())
    with database.session() as session:
        advance(session, ctx, batch_id)
        assert not session.get(Batch, batch_id).finalized  # type: ignore[union-attr]
    assert admin_market.tasks.get_task(task_id).status == TaskStatus.ASSIGNED
    with pytest.raises(ContractRevert) as refused:
        admin_market.as_account(coordinator).tasks.release_task(task_id)
    assert refused.value.error_name == "TaskVouched"
    admin_market.as_account(miners[1]).tasks.commit_results(commitment, [b"", b""])
    assert admin_market.tasks.get_task(task_id).status == TaskStatus.RESULTS_COMMITTED
    assert admin_market.tasks.miner_amounts_of(task_id) == list(commitment.miner_amounts)
    with database.session() as session:  # the batch stops waiting for a release
        advance(session, ctx, batch_id)
        assert session.get(Batch, batch_id).finalized  # type: ignore[union-attr]
    database.dispose()
