"""Finding the processes a test session leaves behind: every process the session starts inherits a marker in
its environment (set at session start), so one still running at the end is found by its environment, even
after it was orphaned and adopted by init. Linux (/proc)."""

from __future__ import annotations

import os
from pathlib import Path

MARK = "BATCHMARKET_TEST_SESSION"
# multiprocessing's own helpers of this process (the fork server stages start from, its resource tracker):
# they exit when this process does, so they are not left behind
OWN_HELPERS = (
    "from multiprocessing.forkserver import main",
    "from multiprocessing.resource_tracker import main",
)


def marked_processes(mark: str, proc: Path = Path("/proc")) -> list[tuple[int, str]]:
    """(pid, command line) of every live process but this one and its multiprocessing helpers whose
    environment holds MARK=`mark`."""
    needle = f"{MARK}={mark}".encode()
    found = []
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environment = (entry / "environ").read_bytes().split(b"\0")
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
            # the parent pid is the second field after the parenthesized command name
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):  # gone meanwhile, or not ours to read
            continue
        if needle not in environment:
            continue
        if parent == os.getpid() and any(helper in command for helper in OWN_HELPERS):
            continue
        found.append((int(entry.name), command))
    return found
