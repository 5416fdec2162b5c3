"""A batch that waits says why: with no live miner able to hold its model, it stays validating with a reason
the user sees (`status_detail` in the batch object and `market status`), not silently."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from eth_account.signers.local import LocalAccount
from redis import Redis

from client_sdk.chain.contracts import Market
from client_sdk.inputs import params_hash
from client_sdk.protocol.task import TaskPrices
from coordinator.chain import CoordinatorChain
from coordinator.config import Settings
from coordinator.db.migrate import upgrade
from coordinator.db.models import Batch
from coordinator.db.session import Database
from coordinator.services import batches, files
from coordinator.services.lifecycle import Context, advance
from coordinator.services.live import LiveMembership
from tests.coordinator.helpers import batch_file

ENDPOINT, WINDOW = "/v1/chat/completions", "24h"


def test_no_live_miner_means_validating_with_a_reason(
    admin_market: Market, accounts: list[LocalAccount], settings: Settings, tmp_path: Path, redis_url: str
) -> None:
    user = accounts[2]
    url = f"sqlite:///{tmp_path / 'c.db'}"
    upgrade(url)
    database = Database(url)
    settings = dataclasses.replace(settings, database_url=url)
    with database.session() as session:
        file = files.ingest_batch_file(session, settings, user.address, "in.jsonl", batch_file(3), 0)
        model, root, count = file.model, file.input_root, file.line_count
    assert model is not None and root is not None
    served = settings.model(model)
    assert served is not None
    admin_market.token.mint(user.address, 10**6)
    owner = admin_market.as_account(user)
    owner.token.approve(owner.escrow.address, 10**6)
    task_id = owner.tasks.create_task(
        served.model_hash, bytes.fromhex(root[2:]), count, params_hash(ENDPOINT, WINDOW), 10**6,
        admin_market.chain_time() + 86_400, TaskPrices(10**6, 10**6),
    )  # fmt: skip
    with database.session() as session:
        batch = batches.create_batch(
            session, user.address, input_file_id=file.id, endpoint=ENDPOINT, completion_window=WINDOW,
            metadata=None, task_id=task_id, task=admin_market.tasks.get_task(task_id), task_prices=None,
            model_hash=lambda _: served.model_hash, asking_price=0, max_window_h=168, now=0,
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
        f"waiting for miners: the 0 live miner(s) cannot hold a replica of {model} "
        "(the escrow comes back if none can by the task's deadline)"
    )
    assert shown["errors"] is None
    database.dispose()
