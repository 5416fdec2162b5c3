"""Stopping a child process this program started: asked first, killed if it does not go."""

from __future__ import annotations

import subprocess
from typing import Protocol


class StoppableProcess(Protocol):
    """What stop_process needs of a process handle: subprocess.Popen, or demo.launcher's LaunchedProcess."""

    def poll(self) -> int | None: ...
    def terminate(self) -> None: ...
    def kill(self) -> None: ...
    def wait(self, timeout: float | None = None) -> int: ...


def stop_process(process: StoppableProcess, grace_s: float) -> None:
    """Asks `process` to exit (SIGTERM), kills it (SIGKILL) if it has not within `grace_s` seconds, and
    returns once it has exited and been reaped."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
