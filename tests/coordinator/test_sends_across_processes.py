"""Worker processes that sign with the coordinator's one key (Celery's prefork pool, or workers on other
machines) serialize their sends through a lock in Redis: three processes creating tasks at once from one
wallet all succeed, each task once, with consecutive nonces."""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

from eth_account import Account
from eth_account.signers.local import LocalAccount
from eth_utils.crypto import keccak
from redis import Redis

from client_sdk.chain.anvil import Anvil
from client_sdk.chain.contracts import Market, connect
from coordinator.chain import redis_sending_lock
from demo.lifecycle import DemoConfig
from tests.helpers import demo_task_for

PROCESSES, EACH = 3, 4


def create_tasks(
    rpc_url: str, deployment_file: str, key: str, redis_url: str, tag: int, deadline: int
) -> int:
    """In a fresh process: EACH task creations from the wallet `key`, sends locked in Redis."""
    market = connect(
        rpc_url, Path(deployment_file), Account.from_key(key), redis_sending_lock(Redis.from_url(redis_url))
    )
    for i in range(EACH):
        demo_task_for(market, f"process {tag} file {i}", deadline)
    return EACH


def test_processes_sharing_a_key_never_collide_on_a_nonce(
    admin_market: Market, accounts: list[LocalAccount], chain: Anvil, deployment_file: Path, redis_url: str
) -> None:
    user, config = accounts[2], DemoConfig()
    total = PROCESSES * EACH
    admin_market.token.mint(user.address, total * config.max_price)
    mine = admin_market.as_account(user)
    mine.token.approve(mine.escrow.address, total * config.max_price)
    before, nonce = admin_market.tasks.task_count(), admin_market.w3.eth.get_transaction_count(user.address)
    deadline = admin_market.chain_time() + 86_400
    key = user.key.to_0x_hex()
    with ProcessPoolExecutor(PROCESSES, mp_context=get_context("spawn")) as pool:
        futures = [
            pool.submit(create_tasks, chain.rpc_url, str(deployment_file), key, redis_url, p, deadline)
            for p in range(PROCESSES)
        ]
        done = [future.result(timeout=120) for future in futures]
        assert sum(done) == total
    assert admin_market.tasks.task_count() == before + total
    assert admin_market.w3.eth.get_transaction_count(user.address) == nonce + total
    roots = {bytes(admin_market.tasks.get_task(t).input_root) for t in range(before + 1, before + total + 1)}
    assert roots == {keccak(text=f"process {p} file {i}") for p in range(PROCESSES) for i in range(EACH)}
