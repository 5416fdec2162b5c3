"""The README's Quick start, run as a newcomer runs it: its shell block, line by line in one bash, with only
its ports moved to free ones (the chain's, the API's, the stage's and Redis's: on a shared machine they may be
taken), run from a scratch directory (the repository's paths named in full, so that what the commands write
stays out of the checkout). The batch it submits must come back served: a README that drifts from the code
fails here."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
from pathlib import Path

import pytest

from client_sdk.chain.anvil import free_port
from tests.conftest import ROOT

QUICK_START_TIMEOUT_S = 540  # under the test's own timeout, so that a hang reports the run's output
pytestmark = pytest.mark.timeout(600)  # about 80 s alone; 290 s was seen beside the rest of `make test`


def quick_start_block(readme: str) -> str:
    """The first ```sh block under the README's '## Quick start' heading."""
    section = readme.split("\n## Quick start\n", 1)[1].split("\n## ", 1)[0]
    match = re.search(r"```sh\n(.*?)```", section, re.DOTALL)
    assert match, "the Quick start has no ```sh block"
    return match.group(1)


def on_free_ports(block: str) -> str:
    """The block with its fixed ports replaced by free ones; a bare `redis-server &` gets the free port."""
    ports = {"8545": free_port(), "8000": free_port(), "5555": free_port(), "6379": free_port()}
    for fixed, free in ports.items():
        block = re.sub(rf"(?<=:){fixed}\b|(?<=--port ){fixed}\b", str(free), block)
    assert block.count("redis-server &") == 1, "the Quick start no longer starts redis-server as expected"
    return block.replace("redis-server &", f"redis-server --port {ports['6379']} --save '' &")


def from_elsewhere(block: str) -> str:
    """The block as run from another directory: the repository's make targets, virtual environment and
    Foundry binaries named by their path in it (what the commands write, the model, the deployment, the
    database and the batch, then lands in that directory, not in the checkout)."""
    block = re.sub(r"^make ", f"make -C {ROOT} ", block, flags=re.MULTILINE)
    return re.sub(r"(?<![\w/.])(\.venv/bin/|node_modules/\.bin/)", rf"{ROOT}/\1", block)


def test_the_readme_quick_start_serves_its_batch(tmp_path: Path) -> None:
    block = from_elsewhere(on_free_ports(quick_start_block((ROOT / "README.md").read_text())))
    script = tmp_path / "quick_start.sh"
    # every background job of the block is in this shell's process group, stopped at the end whatever happens
    script.write_text("set -euo pipefail\ntrap 'kill $(jobs -p) 2>/dev/null; wait' EXIT\n" + block)
    environment = {
        k: v for k, v in os.environ.items() if not k.startswith("BATCHMARKET_") or k.endswith("SESSION")
    }
    process = subprocess.Popen(
        ["bash", str(script)],
        cwd=tmp_path,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = process.communicate(timeout=QUICK_START_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        pytest.fail(
            f"the Quick start did not finish in {QUICK_START_TIMEOUT_S} s:\n{what_went_wrong(output)}"
        )
    finally:
        with_leftovers_stopped(process.pid)
    (tmp_path / "output.log").write_text(output)  # kept with the test's temporary files
    table = " ".join(output.replace("│", " ").split())  # the batch's summary table, as words
    assert process.returncode == 0, what_went_wrong(output)
    assert "status completed task id 1 completed 1 failed 0 total 1" in table, what_went_wrong(output)


def what_went_wrong(output: str) -> str:
    """The lines of the run that name an error, then its last lines (anvil logs every block in between)."""
    lines = output.splitlines()
    errors = [line for line in lines if "error" in line.lower() or "traceback" in line.lower()]
    return "\n".join([*errors[:40], "...", *lines[-40:]])


def with_leftovers_stopped(group: int) -> None:
    """Kills what is left of the script's process group (a job that ignored the trap)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, signal.SIGKILL)
