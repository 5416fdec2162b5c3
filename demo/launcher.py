"""Starts `python -m <module> <args>` processes for a local market from a fork server that has already
imported the libraries they all load (torch, web3, FastAPI, SQLAlchemy, Celery, transformers): on a CPU
each process skips about 3 s of imports, which was most of a local market's start.

A launched process behaves as one started with `python -m`: its own session (so its process group can be
stopped whole), exactly the environment it is given, stdout and stderr appended to its log, its niceness.
Only libraries are preloaded, none of the project's modules, so nothing the project reads from the
environment when it is imported was read before the process got its own environment. As in any program
that uses multiprocessing, a script that starts a local market keeps its work under `if __name__ ==
"__main__":` (each launched process imports the script's main module first)."""

from __future__ import annotations

import multiprocessing
import os
import runpy
import subprocess
import sys
from multiprocessing.context import ForkServerProcess
from pathlib import Path

# What every local market process imports; the fork server imports it once. Stages of an in-process
# pipeline (miner.pipeline.processes) fork from the same server: whichever asks first sets its preload.
PRELOADED = [
    "torch",
    "transformers",
    "safetensors",
    "numpy",
    "scipy",
    "web3",
    "eth_account",
    "fastapi",
    "uvicorn",
    "sqlalchemy",
    "alembic",
    "celery",
    "redis",
    "zmq",
    "httpx",
    "typer",
    "rich",
    "miner.pipeline.processes",
]


def _run_module(module: str, args: list[str], environment: dict[str, str], log: Path, niceness: int) -> None:
    """In the forked process: becomes `python -m module args` with `environment`, logging to `log`."""
    os.setsid()
    if niceness:
        os.nice(niceness)
    descriptor = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    for stream in (1, 2):
        os.dup2(descriptor, stream)
    os.close(descriptor)
    # stdin from /dev/null on descriptor 0, as a shell gives a background job: multiprocessing left sys.stdin
    # on another descriptor, which uvicorn hands its spawned HTTP workers, where it does not exist
    empty = os.open(os.devnull, os.O_RDONLY)
    os.dup2(empty, 0)
    os.close(empty)
    sys.stdin = open(0, closefd=False)  # noqa: SIM115
    sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115 - the process's own stdout until exit
    sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
    os.environ.clear()
    os.environ.update(environment)
    sys.argv = [module, *args]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


class LaunchedProcess:
    """What a local market asks of a `subprocess.Popen` (pid, poll, wait, terminate, kill, returncode), for a
    process started from the fork server."""

    def __init__(self, process: ForkServerProcess) -> None:
        self._process = process
        self.pid: int = process.pid or 0

    @property
    def returncode(self) -> int | None:
        return self._process.exitcode

    def poll(self) -> int | None:
        return self._process.exitcode

    def wait(self, timeout: float | None = None) -> int:
        self._process.join(timeout)
        if self._process.exitcode is None:
            raise subprocess.TimeoutExpired(f"pid {self.pid}", timeout or 0.0)
        return self._process.exitcode

    def terminate(self) -> None:
        if self._process.exitcode is None:
            self._process.terminate()

    def kill(self) -> None:
        if self._process.exitcode is None:
            self._process.kill()


def launch(
    module: str, args: list[str], environment: dict[str, str], log: Path, niceness: int = 0
) -> LaunchedProcess:
    """Starts `python -m module args` (see the module's docstring) and returns its handle."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOADED)
    process = context.Process(
        target=_run_module, args=(module, args, environment, log, niceness), name=module, daemon=False
    )
    process.start()
    return LaunchedProcess(process)
