"""stop_process: a child that obeys SIGTERM exits by it, one that ignores it is killed after the grace period,
one that already exited is left as it is; each time the child is reaped before it returns."""

from __future__ import annotations

import signal
import subprocess
import sys

from client_sdk.processes import stop_process

IGNORES_SIGTERM = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); "
    "time.sleep(60)"
)


def started(code: str) -> subprocess.Popen[str]:
    process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None and process.stdout.readline() == "ready\n"
    return process


def test_a_child_that_obeys_sigterm_exits_by_it() -> None:
    process = started("import time; print('ready', flush=True); time.sleep(60)")
    stop_process(process, grace_s=30)
    assert process.returncode == -signal.SIGTERM


def test_a_child_that_ignores_sigterm_is_killed_after_the_grace_period() -> None:
    process = started(IGNORES_SIGTERM)
    stop_process(process, grace_s=0.3)
    assert process.returncode == -signal.SIGKILL


def test_a_child_that_already_exited_is_left_as_it_is() -> None:
    process = started("print('ready', flush=True)")
    process.wait()
    stop_process(process, grace_s=30)
    assert process.returncode == 0
