"""A batch that waits says why: with no live miner able to hold its model, it stays validating with a reason
the user sees (`status_detail` in the batch object and `market status`), not silently."""

from __future__ import annotations

from eth_account.signers.local import LocalAccount
from redis import Redis

from client_sdk.chain.contracts import Market
from coordinator.chain import CoordinatorChain
from coordinator.config import Settings
from coordinator.db.models import Batch
from coordinator.db.session import Database
from coordinator.services import batches
from coordinator.services.lifecycle import Context, advance
from coordinator.services.live import LiveMembership
from tests.coordinator.helpers import ENDPOINT, funded_task, ingested_batch_file

WINDOW = "24h"


def test_no_live_miner_means_validating_with_a_reason(
    admin_market: Market, accounts: list[LocalAccount], settings: Settings, db: Database, redis_url: str
) -> None:
    user, database = accounts[2], db
    file = ingested_batch_file(database, settings, user.address)
    task_id = funded_task(admin_market, user, file.model_hash, file.input_root, file.line_count, 10**6, 10**6)
    with database.session() as session:
        batch = batches.create_batch(
            session, user.address, input_file_id=file.id, endpoint=ENDPOINT, completion_window=WINDOW,
            metadata=None, task_id=task_id, task=admin_market.tasks.get_task(task_id), task_prices=None,
            serving=settings.model, asking_price=0, max_window_h=168, now=0,
        )  # fmt: skip
        batch_id = batch.id
    ctx = Context(settings, CoordinatorChain(admin_market), LiveMembership(Redis.from_url(redis_url), 10))
    with database.session() as session:
        assert advance(session, ctx, batch_id) == "validating"
    with database.session() as session:
        batch = session.get(Batch, batch_id)
        assert batch is not None
        shown = batches.batch_object(batch)
    assert shown["status_detail"] == (
        f"waiting for miners: the 0 live miner(s) cannot hold a replica of {file.model} "
        "(the escrow comes back if none can by the task's deadline)"
    )
    assert shown["errors"] is None
