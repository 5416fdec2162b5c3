"""Coordinator fixtures: real Redis, SQLite and PostgreSQL (each test gets a fresh database, migrated with
Alembic), a tiny served model with a tokenizer, and API clients that sign as a given wallet."""

from __future__ import annotations

import dataclasses
import secrets
import threading
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa
import uvicorn
from eth_account import Account
from eth_account.signers.local import LocalAccount
from redis import Redis

from client_sdk.chain.anvil import free_port
from client_sdk.chain.contracts import Market
from client_sdk.http import WalletSigner
from coordinator.api.app import create_app
from coordinator.chain import CoordinatorChain
from coordinator.config import ServedModel, Settings
from coordinator.db.migrate import upgrade
from coordinator.db.session import Database
from coordinator.services.live import LiveMembership
from coordinator.wakes import Doorbell, watch
from demo.services import postgres_server, redis_server
from miner.tiny_checkpoint import build_tiny_model

MODEL_NAME = "tiny/qwen3"
ALICE = Account.from_key("0x" + "a1" * 32)
BOB = Account.from_key("0x" + "b0" * 32)


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    with redis_server() as url:
        yield url


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    try:
        server = postgres_server()
        url = server.__enter__()
    except (FileNotFoundError, RuntimeError) as exc:
        pytest.skip(f"PostgreSQL tests skipped: cannot start a server ({exc})")
    try:
        yield url
    finally:
        server.__exit__(None, None, None)


@pytest.fixture(scope="session")
def served_model(tmp_path_factory: pytest.TempPathFactory) -> ServedModel:
    return ServedModel(MODEL_NAME, build_tiny_model(tmp_path_factory.mktemp("tiny-qwen3")))


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh, migrated database of each kind."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'coordinator.db'}"
    else:
        server: str = request.getfixturevalue("postgres_url")
        name = f"t_{secrets.token_hex(6)}"
        admin = sa.create_engine(server, isolation_level="AUTOCOMMIT")
        with admin.connect() as connection:
            connection.execute(sa.text(f"CREATE DATABASE {name}"))
        admin.dispose()
        url = server.rsplit("/", 1)[0] + f"/{name}"
    upgrade(url)
    return url


@pytest.fixture
def db(database_url: str) -> Iterator[Database]:
    """The coordinator's database over `database_url`, for tests that call the services directly."""
    database = Database(database_url)
    yield database
    database.dispose()


@pytest.fixture
def doorbell(redis_url: str) -> Doorbell:
    return Doorbell(Redis.from_url(redis_url))


@pytest.fixture
def wakes_db(tmp_path: Path, doorbell: Doorbell) -> Iterator[Database]:
    """A fresh SQLite database whose commits wake miners, as the API's and the workers' do."""
    url = f"sqlite:///{tmp_path / 'wakes.db'}"
    upgrade(url)
    database = Database(url, on_commit=partial(watch, doorbell=doorbell))
    yield database
    database.dispose()


@pytest.fixture
def live(redis_url: str) -> LiveMembership:
    """Live membership in the shared Redis server (use fresh addresses per test)."""
    return LiveMembership(Redis.from_url(redis_url))


@pytest.fixture
def settings(database_url: str, redis_url: str, served_model: ServedModel) -> Settings:
    return Settings(database_url=database_url, redis_url=redis_url, models=(served_model,))


class ApiServer:
    """The real app served by uvicorn on a free port, in a thread; `client(account)` signs as that wallet."""

    def __init__(self, settings: Settings, chain: CoordinatorChain | None = None) -> None:
        self.app = create_app(settings, chain)
        self.url = f"http://127.0.0.1:{free_port()}"
        port = int(self.url.rsplit(":", 1)[1])
        self.server = uvicorn.Server(uvicorn.Config(self.app, port=port, log_level="warning", lifespan="on"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.clients: list[httpx.Client] = []

    def __enter__(self) -> ApiServer:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the API server did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *_exc: object) -> None:
        for client in self.clients:
            client.close()
        self.server.should_exit = True
        self.thread.join(timeout=20)

    def client(self, account: LocalAccount) -> httpx.Client:
        client = httpx.Client(base_url=self.url, auth=WalletSigner(account), timeout=60)
        self.clients.append(client)
        return client

    def reconfigure(self, **changes: object) -> None:
        self.app.state.settings = dataclasses.replace(self.app.state.settings, **changes)


@pytest.fixture
def chainless_api(tmp_path: Path, redis_url: str, served_model: ServedModel) -> Iterator[ApiServer]:
    """The API on a fresh SQLite database without a chain: for routes that read none."""
    url = f"sqlite:///{tmp_path / 'chainless.db'}"
    upgrade(url)
    with ApiServer(Settings(database_url=url, redis_url=redis_url, models=(served_model,))) as server:
        yield server


@pytest.fixture
def api(settings: Settings, admin_market: Market) -> Iterator[ApiServer]:
    """The API over the session's chain (reads only: task owners at registration, miners' registrations)."""
    with ApiServer(settings, CoordinatorChain(admin_market)) as server:
        yield server
