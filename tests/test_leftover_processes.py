"""The session's leftover check finds a process by the marker it inherited, orphaned or not, and only while it
runs."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from tests.leftover_processes import MARK, marked_processes


def test_a_marked_process_is_found_until_it_ends() -> None:
    mark = f"check-{os.getpid()}-{time.time_ns()}"
    child = subprocess.Popen(["sleep", "30"], env={**os.environ, MARK: mark})
    unmarked = subprocess.Popen(["sleep", "30"], env={k: v for k, v in os.environ.items() if k != MARK})
    try:
        assert [pid for pid, _ in marked_processes(mark)] == [child.pid]
        assert "sleep 30" in marked_processes(mark)[0][1]
    finally:
        for process in (child, unmarked):
            process.kill()
            process.wait()
    assert marked_processes(mark) == []


def test_an_orphaned_grandchild_is_found() -> None:
    """A child that starts a grandchild and exits: the grandchild, adopted by init, still carries the mark."""
    mark = f"orphan-{os.getpid()}-{time.time_ns()}"
    script = "import subprocess as s; print(s.Popen(['sleep', '30'], stdout=s.DEVNULL, stderr=s.DEVNULL).pid)"
    out = subprocess.run([sys.executable, "-c", script], env={**os.environ, MARK: mark}, capture_output=True)
    grandchild = int(out.stdout)
    try:
        assert [pid for pid, _ in marked_processes(mark)] == [grandchild]
    finally:
        os.kill(grandchild, 9)
    deadline = time.monotonic() + 5
    while marked_processes(mark) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert marked_processes(mark) == []


def test_this_process_multiprocessing_helpers_are_not_leftovers(tmp_path: Path) -> None:
    """The fork server and resource tracker of this process exit with it; anything else marked is left behind,
    a stage the fork server started or a helper of another process included (a process table written out)."""

    def process(pid: int, parent: int, command: str, mark: str = "m") -> None:
        entry = tmp_path / str(pid)
        entry.mkdir()
        (entry / "environ").write_bytes(f"PATH=/bin\0{MARK}={mark}\0".encode())
        (entry / "cmdline").write_bytes(command.replace(" ", "\0").encode())
        (entry / "stat").write_text(f"{pid} (python (x)) S {parent} {pid} {pid} 0")

    me = os.getpid()
    process(101, me, "python -c from multiprocessing.forkserver import main; main(18)")
    process(102, me, "python -c from multiprocessing.resource_tracker import main;main(17)")
    process(103, 101, "python -c from multiprocessing.forkserver import main; stage")
    process(104, 1, "python -c from multiprocessing.forkserver import main; main(3)")
    process(105, me, "redis-server --port 0")
    process(106, me, "redis-server --port 1", mark="another session")
    assert sorted(pid for pid, _ in marked_processes("m", proc=tmp_path)) == [103, 104, 105]
