"""Throwaway Redis and PostgreSQL servers (for the demo and the tests), each on a free port in a temp dir.

PostgreSQL refuses to run as root, so as root the server runs as the `postgres` system user. When no server
binary exists the caller skips, saying why.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from client_sdk.chain.anvil import free_port


def _wait_for_port(port: int, process: subprocess.Popen[bytes], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with status {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{what} did not open port {port} within {timeout} s")


@contextmanager
def redis_server() -> Iterator[str]:
    """A throwaway redis-server; yields its URL."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise FileNotFoundError("redis-server is not installed")
    port = free_port()
    with tempfile.TemporaryDirectory() as scratch:
        process = subprocess.Popen(
            [
                binary,
                "--port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                scratch,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            _wait_for_port(port, process, "redis-server")
            yield f"redis://127.0.0.1:{port}/0"
        finally:
            process.terminate()
            process.wait(timeout=10)


def _postgres_bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"))
    return str(candidates[-1]) if candidates else None


@contextmanager
def postgres_server() -> Iterator[str]:
    """A throwaway PostgreSQL cluster (initdb + postgres on a free port); yields a SQLAlchemy URL."""
    initdb, postgres = _postgres_bin("initdb"), _postgres_bin("postgres")
    if initdb is None or postgres is None:
        raise FileNotFoundError("PostgreSQL server binaries (initdb, postgres) are not installed")
    as_user: list[str] = []
    if os.geteuid() == 0:
        runuser = shutil.which("runuser")
        if runuser is None:
            raise FileNotFoundError("running as root without runuser to start PostgreSQL as another user")
        as_user = [runuser, "-u", "postgres", "--"]
    port = free_port()
    scratch = Path(tempfile.mkdtemp(prefix="pg-"))
    data = scratch / "data"
    try:
        if as_user:
            shutil.chown(scratch, "postgres")
        subprocess.run(
            [*as_user, initdb, "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8"],
            check=True,
            capture_output=True,
        )
        process = subprocess.Popen(
            [
                *as_user,
                postgres,
                "-D",
                str(data),
                "-p",
                str(port),
                "-h",
                "127.0.0.1",
                "-k",
                str(scratch),
                "-c",
                "fsync=off",
                "-c",
                "max_connections=300",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            _wait_for_port(port, process, "postgres")
            yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres"
        finally:
            process.terminate()
            process.wait(timeout=30)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
