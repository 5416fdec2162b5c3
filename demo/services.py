"""Throwaway Redis and PostgreSQL servers (for the demo, the tests and the fault benchmark), each on a free
port in a temp dir. A server can be killed (SIGKILL, as a crash) and started again on the same port and data:
Redis keeps an append-only file synced on every write, PostgreSQL recovers from its write-ahead log.

PostgreSQL refuses to run as root, so as root the server runs as the `postgres` system user. When no server
binary exists the caller skips, saying why.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg

from client_sdk.chain.anvil import free_port


def _wait_until_ready(server: _Server, process: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    """Wait until the server answers a request, not just until its port is open: PostgreSQL opens its port
    while it is still starting up or replaying its log, and Redis while it is loading its append-only file."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{server.name} exited with status {process.returncode}")
        if server.answers():
            return
        time.sleep(0.05)
    raise RuntimeError(f"{server.name} on port {server.port} was not ready within {timeout} s")


class _Server:
    """A server process in its own process group on a fixed port; `kill` is a crash, `start` brings it back
    on the same port and data."""

    name = "server"

    def __init__(self) -> None:
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    def command(self) -> list[str]:
        raise NotImplementedError

    def answers(self) -> bool:
        """Whether the server serves requests now."""
        raise NotImplementedError

    def start(self) -> None:
        self.process = subprocess.Popen(
            self.command(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        _wait_until_ready(self, self.process)

    def kill(self) -> None:
        """SIGKILL to the whole group (a server's own children die with it, as in a machine's crash)."""
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)
        self.process = None

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.kill()
        self.process = None


class RedisServer(_Server):
    name = "redis-server"

    def __init__(self, directory: Path) -> None:
        super().__init__()
        binary = shutil.which("redis-server")
        if binary is None:
            raise FileNotFoundError("redis-server is not installed")
        self.binary, self.directory = binary, directory

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def answers(self) -> bool:
        # a Redis loading its append-only file answers PING with a LOADING error
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as connection:
                connection.sendall(b"PING\r\n")
                return connection.recv(64).startswith(b"+PONG")
        except OSError:
            return False

    def command(self) -> list[str]:
        # the append-only file, synced on every write, brings the queue and the nonces back after a crash
        return [
            self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "yes",
            "--appendfsync", "always", "--dir", str(self.directory),
        ]  # fmt: skip


def _postgres_bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"))
    return str(candidates[-1]) if candidates else None


class PostgresServer(_Server):
    name = "postgres"

    def __init__(self, scratch: Path) -> None:
        super().__init__()
        initdb, postgres = _postgres_bin("initdb"), _postgres_bin("postgres")
        if initdb is None or postgres is None:
            raise FileNotFoundError("PostgreSQL server binaries (initdb, postgres) are not installed")
        self.as_user: list[str] = []
        if os.geteuid() == 0:
            runuser = shutil.which("runuser")
            if runuser is None:
                raise FileNotFoundError("running as root without runuser to start PostgreSQL as another user")
            self.as_user = [runuser, "-u", "postgres", "--"]
            shutil.chown(scratch, "postgres")
        self.postgres, self.scratch, self.data = postgres, scratch, scratch / "data"
        subprocess.run(
            [*self.as_user, initdb, "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8"],
            check=True,
            capture_output=True,
        )

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    def answers(self) -> bool:
        # a PostgreSQL starting up or recovering refuses connections ("the database system is starting up")
        try:
            with psycopg.connect(
                host="127.0.0.1", port=self.port, user="postgres", dbname="postgres", connect_timeout=2
            ) as connection:
                connection.execute("SELECT 1")
            return True
        except psycopg.OperationalError:
            return False

    def command(self) -> list[str]:
        return [
            *self.as_user, self.postgres, "-D", str(self.data), "-p", str(self.port), "-h", "127.0.0.1",
            "-k", str(self.scratch), "-c", "fsync=off", "-c", "max_connections=300",
        ]  # fmt: skip

    def kill(self) -> None:
        """SIGKILL to the postmaster and every backend (started through runuser, they are outside the
        launcher's process group)."""
        lock = self.data / "postmaster.pid"
        postmaster = int(lock.read_text().split()[0]) if lock.is_file() else None
        super().kill()
        if postmaster is not None:
            for pid in [postmaster, *_descendants(postmaster)]:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            _wait_gone(postmaster)


def _descendants(pid: int) -> list[int]:
    """Every process below `pid`, from /proc (Linux)."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            parents[int(stat.parent.name)] = int(fields[1])
    found, frontier = [], [pid]
    while frontier:
        children = [child for child, parent in parents.items() if parent in frontier]
        found += children
        frontier = children
    return found


def _wait_gone(pid: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and Path(f"/proc/{pid}").exists():
        time.sleep(0.05)


@contextmanager
def redis_server() -> Iterator[str]:
    """A throwaway redis-server; yields its URL."""
    with running_redis() as server:
        yield server.url


@contextmanager
def running_redis() -> Iterator[RedisServer]:
    """A throwaway redis-server that can be killed and started again."""
    with tempfile.TemporaryDirectory() as scratch:
        server = RedisServer(Path(scratch))
        server.start()
        try:
            yield server
        finally:
            server.stop()


@contextmanager
def postgres_server() -> Iterator[str]:
    """A throwaway PostgreSQL cluster (initdb + postgres on a free port); yields a SQLAlchemy URL."""
    with running_postgres() as server:
        yield server.url


@contextmanager
def running_postgres() -> Iterator[PostgresServer]:
    """A throwaway PostgreSQL cluster that can be killed and started again."""
    scratch = Path(tempfile.mkdtemp(prefix="pg-"))
    try:
        server = PostgresServer(scratch)
        server.start()
        try:
            yield server
        finally:
            server.stop()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
