"""A batch that fails after its task was funded gives the task up on-chain at once: the owner can withdraw the
whole escrow now, not at the task's deadline (days). Two of the worker's three ways to fail a batch: its task
does not back it (here, another input root) and its model is no longer served. (The third, a max price that
leaves no room under the value cap for a pipeline's stake locks, needs live miners and a plan; it fails the
batch through the same step, lifecycle._fail.)"""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import Callable

import pytest
from eth_account.signers.local import LocalAccount
from redis import Redis

from client_sdk.chain.contracts import Market
from client_sdk.protocol.task import TaskStatus
from coordinator.chain import CoordinatorChain
from coordinator.config import Settings
from coordinator.db.models import Batch
from coordinator.db.session import Database
from coordinator.services import batches
from coordinator.services.errors import InvalidInput
from coordinator.services.lifecycle import Context, advance
from coordinator.services.live import LiveMembership
from tests.coordinator.helpers import ENDPOINT, funded_task, ingested_batch_file

MAX_PRICE = 10**6


def other_root(root: bytes) -> bytes:
    return bytes(byte ^ 0xFF for byte in root)


def unserved(settings: Settings) -> Settings:
    return dataclasses.replace(settings, models=())


@pytest.mark.parametrize(
    ("failure", "task_root", "worker_settings", "code"),
    [
        ("the task commits to other lines", other_root, lambda s: s, "invalid_task"),
        ("the model is no longer served", lambda root: root, unserved, "model_not_found"),
    ],
)
def test_a_batch_failed_by_the_worker_refunds_its_whole_escrow_at_once(
    admin_market: Market,
    accounts: list[LocalAccount],
    settings: Settings,
    db: Database,
    redis_url: str,
    failure: str,
    task_root: Callable[[bytes], bytes],
    worker_settings: Callable[[Settings], Settings],
    code: str,
) -> None:
    coordinator, user, database = accounts[1], accounts[2], db
    file = ingested_batch_file(database, settings, user.address)
    escrowed_before = admin_market.escrow.balance_of(user.address)
    task_id = funded_task(
        admin_market, user, file.model_hash, task_root(file.input_root), file.line_count, MAX_PRICE, 10**6
    )
    with database.session() as session:  # as registered before the model or the checks at creation changed
        batch_id = "batch_" + secrets.token_hex(6)
        session.add(
            Batch(
                id=batch_id, owner=user.address, input_file_id=file.id, endpoint=ENDPOINT, model=file.model,
                completion_window="24h", task_id=task_id, status="validating", created_at=0,
                expires_at=86_400, request_total=file.line_count,
            )
        )  # fmt: skip
    chain = CoordinatorChain(admin_market.as_account(coordinator))
    ctx = Context(worker_settings(settings), chain, LiveMembership(Redis.from_url(redis_url), 10))
    with database.session() as session:
        assert advance(session, ctx, batch_id) == "failed", failure
    with database.session() as session:
        batch = session.get(Batch, batch_id)
        assert batch is not None and batch.errors is not None
        assert [e["code"] for e in batch.errors] == [code]
    assert admin_market.tasks.get_task(task_id).status == TaskStatus.CANCELLED
    assert admin_market.escrow.balance_of(user.address) == escrowed_before + MAX_PRICE
    assert admin_market.escrow.escrow_of(task_id) == 0
    with database.session() as session:  # a later sweep finds nothing left to do
        assert advance(session, ctx, batch_id) == "failed"
    with database.session() as session, pytest.raises(InvalidInput) as refused:  # `market cancel` says why
        batches.cancel_batch(session, user.address, batch_id, 0)
    assert refused.value.args[0] == (
        "a batch that is failed cannot be cancelled: no line ran, and its task was given up on-chain when it "
        "failed (if still open), so its whole escrow is yours to withdraw (`market withdraw`)"
    )
