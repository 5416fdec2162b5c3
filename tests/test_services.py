"""The throwaway servers: `start` returns only once the server answers requests (PostgreSQL opens its port
while still starting up, which once failed a migration run on CI), both right after creation and after a
crash, with the data written before the crash back."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import psycopg
import pytest
import redis

from demo.services import PostgresServer, RedisServer, _Server, running_postgres, running_redis


class _AnswersOnTheThirdTry(_Server):
    """A process that is up at once but answers only on the third readiness check."""

    name = "slow-starter"

    def __init__(self, exits: bool = False) -> None:
        super().__init__()
        self.checks, self.exits = 0, exits

    def command(self) -> list[str]:
        return [sys.executable, "-c", "" if self.exits else "import time; time.sleep(60)"]

    def answers(self) -> bool:
        self.checks += 1
        return self.checks >= 3


def test_start_waits_until_the_server_answers() -> None:
    server = _AnswersOnTheThirdTry()
    server.start()
    try:
        assert server.checks == 3
    finally:
        server.stop()


def test_start_reports_a_server_that_exits_before_it_answers() -> None:
    server = _AnswersOnTheThirdTry(exits=True)
    with pytest.raises(RuntimeError, match="slow-starter exited with status 0"):
        server.start()


@pytest.fixture
def postgres() -> Iterator[PostgresServer]:
    try:
        context = running_postgres()
        server = context.__enter__()
    except (FileNotFoundError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"cannot start PostgreSQL here ({exc})")
    try:
        yield server
    finally:
        context.__exit__(None, None, None)


def _connect(server: PostgresServer) -> psycopg.Connection[tuple[object, ...]]:
    return psycopg.connect(
        host="127.0.0.1", port=server.port, user="postgres", dbname="postgres", autocommit=True
    )


def test_postgres_takes_connections_when_started_and_again_after_a_crash(postgres: PostgresServer) -> None:
    with _connect(postgres) as connection:
        connection.execute("CREATE TABLE kept (value int)")
        connection.execute("INSERT INTO kept VALUES (7)")
    postgres.kill()
    assert not postgres.answers()
    postgres.start()
    with _connect(postgres) as connection:
        assert connection.execute("SELECT value FROM kept").fetchall() == [(7,)]


def test_redis_answers_as_soon_as_started_and_again_after_a_crash() -> None:
    with running_redis() as server:
        assert isinstance(server, RedisServer)
        redis.Redis.from_url(server.url).set("kept", "7")
        server.kill()
        assert not server.answers()
        server.start()
        assert redis.Redis.from_url(server.url).get("kept") == b"7"
