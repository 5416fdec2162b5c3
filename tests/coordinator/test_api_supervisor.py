"""`coordinator serve` runs its HTTP workers under uvicorn's supervisor: a worker that dies (a crash, here a
SIGKILL) takes no request down with it beyond its own connections, the others keep answering, and the
supervisor starts a replacement."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from client_sdk.chain.anvil import free_port
from coordinator.db.migrate import upgrade


def workers(pid: int) -> set[int]:
    """The HTTP worker processes of the server `pid`: its children started by multiprocessing's spawn (not its
    resource tracker), read from Linux /proc."""
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            try:
                command = Path(f"/proc/{child}/cmdline").read_bytes()
            except FileNotFoundError:  # it just ended
                continue
            if b"spawn_main" in command:
                found.add(int(child))
    return found


START_WAIT_S = 120.0  # a worker imports the app when it starts: over 30 s was seen beside a loaded suite


def wait_for(condition: object, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return
        time.sleep(0.1)
    raise AssertionError("timed out")


def healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


@pytest.fixture
def api(redis_url: str, tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    database_url = f"sqlite:///{tmp_path / 'coordinator.db'}"
    upgrade(database_url)
    port = free_port()
    env = os.environ | {"BATCHMARKET_DATABASE_URL": database_url, "BATCHMARKET_REDIS_URL": redis_url}
    process = subprocess.Popen(
        [sys.executable, "-m", "coordinator", "serve", "--port", str(port), "--workers", "2"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: healthy(url) and len(workers(process.pid)) == 2, timeout=START_WAIT_S)
        yield process, url
    finally:
        process.terminate()
        process.wait(timeout=START_WAIT_S)


def test_a_killed_worker_takes_the_service_down_with_it_never(
    api: tuple[subprocess.Popen[bytes], str],
) -> None:
    process, url = api
    victim = min(workers(process.pid))
    os.kill(victim, signal.SIGKILL)
    wait_for(lambda: victim not in workers(process.pid), timeout=10)
    answers = [httpx.get(f"{url}/healthz", timeout=5).status_code for _ in range(20)]
    assert answers == [200] * 20
    # the supervisor replaces the dead worker
    wait_for(lambda: len(workers(process.pid) - {victim}) == 2, timeout=START_WAIT_S)
    assert process.poll() is None
