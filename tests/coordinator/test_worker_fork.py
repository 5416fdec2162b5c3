"""A forked Celery child of `coordinator worker` (which connects in the parent first) opens its own chain,
Redis and database connections instead of sharing the parent's sockets, whose requests then interleaved on
one connection ("Invalid request", "RemoteDisconnected" in normal use)."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest
from eth_account.signers.local import LocalAccount

from client_sdk.chain.anvil import Anvil
from coordinator import worker


def connections() -> tuple[int, int, int, int]:
    """The ids of this process's runtime connections, and the chain's time read through them."""
    _settings, database, ctx, redis = worker.runtime()
    return id(ctx.chain.market.w3.provider), id(redis), id(database), ctx.chain.now()


def in_child(results: multiprocessing.Queue[tuple[int, int, int, int]]) -> None:
    results.put(connections())


def test_a_forked_child_opens_its_own_connections(
    chain: Anvil,
    deployment_file: Path,
    redis_url: str,
    database_url: str,
    accounts: list[LocalAccount],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in {
        "BATCHMARKET_RPC_URL": chain.rpc_url,
        "BATCHMARKET_DEPLOYMENT": str(deployment_file),
        "BATCHMARKET_REDIS_URL": redis_url,
        "BATCHMARKET_DATABASE_URL": database_url,
        "BATCHMARKET_PRIVATE_KEY": accounts[1].key.to_0x_hex(),
    }.items():
        monkeypatch.setenv(name, value)
    worker.runtime.cache_clear()
    try:
        parent = connections()  # as `coordinator worker` does before Celery forks
        fork = multiprocessing.get_context("fork")
        results: multiprocessing.Queue[tuple[int, int, int, int]] = fork.Queue()
        child = fork.Process(target=in_child, args=(results,))
        child.start()
        got = results.get(timeout=60)
        child.join(timeout=30)
    finally:
        worker.runtime.cache_clear()
    assert child.exitcode == 0
    assert all(mine != theirs for mine, theirs in zip(parent[:3], got[:3], strict=True))
    assert got[3] >= parent[3] > 0  # and they work
