"""A batch cancelled through the API alone (as openai-python does) before anything was committed never strands
its escrow: once the task's deadline has passed, the worker expires the task on-chain and the owner's whole
max price is back in its balance, to the unit."""

from __future__ import annotations

from pathlib import Path

from eth_account.signers.local import LocalAccount
from redis import Redis

from client_sdk.chain.anvil import Anvil
from client_sdk.chain.contracts import Market
from client_sdk.chain.types import TaskStatus
from coordinator.chain import CoordinatorChain
from coordinator.config import Settings
from coordinator.db.migrate import upgrade
from coordinator.db.models import Batch
from coordinator.db.session import Database
from coordinator.services.lifecycle import Context, advance
from coordinator.services.live import LiveMembership
from demo.lifecycle import DemoConfig, create_task
from tests.coordinator.helpers import stored_batch


def test_a_cancelled_unassigned_batch_expires_its_task_at_the_deadline(
    admin_market: Market, accounts: list[LocalAccount], chain: Anvil, tmp_path: Path, redis_url: str
) -> None:
    user, config = accounts[2], DemoConfig()
    admin_market.token.mint(user.address, config.max_price)
    task_id = create_task(admin_market.as_account(user), config)
    database_url = f"sqlite:///{tmp_path / 'c.db'}"
    upgrade(database_url)
    database = Database(database_url)
    with database.session() as session:
        batch_id = stored_batch(
            session, user.address, config.requests, 0, status="cancelled", task_id=task_id
        ).id
    ctx = Context(Settings(), CoordinatorChain(admin_market), LiveMembership(Redis.from_url(redis_url), 10))

    with database.session() as session:
        assert advance(session, ctx, batch_id) == "cancelled"
        batch = session.get(Batch, batch_id)
        assert batch is not None and not batch.finalized  # before the deadline: nothing to do yet
    assert admin_market.tasks.get_task(task_id).status == TaskStatus.OPEN

    chain.advance_time(admin_market.tasks.get_task(task_id).deadline - admin_market.chain_time() + 1)
    with database.session() as session:
        assert advance(session, ctx, batch_id) == "cancelled"
        batch = session.get(Batch, batch_id)
        assert batch is not None and batch.finalized
    assert admin_market.tasks.get_task(task_id).status == TaskStatus.EXPIRED
    assert admin_market.escrow.balance_of(user.address) == config.max_price
    database.dispose()
