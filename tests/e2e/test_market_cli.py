"""The user's CLI over a running market: submit with --wait, status, results (verified), list, cancel; and a
cancelled batch settles what was done and refunds the rest."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from client_sdk.protocol.model_identity import served_model_hash
from client_sdk.protocol.task import TaskStatus
from demo.system import UNIT, LocalSystem
from tests.coordinator.helpers import chat_line, jsonl
from tests.e2e.conftest import wait_for


def market(system: LocalSystem, *args: str) -> subprocess.CompletedProcess[str]:
    env = system.environment(system.user) | {"BATCHMARKET_COORDINATOR_URL": system.api_url}
    return subprocess.run(
        [str(Path(sys.executable).parent / "market"), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_submit_wait_results_list(system: LocalSystem, tmp_path: Path) -> None:
    batch_file = tmp_path / "in.jsonl"
    batch_file.write_bytes(jsonl([chat_line(f"cli-{i}", f"say {i}") for i in range(6)]))
    submitted = market(
        system, "submit", str(batch_file), "--model", "tiny/qwen3", "--max-price", "2", "--wait", "--json"
    )
    assert submitted.returncode == 0, submitted.stderr
    batch = json.loads(submitted.stdout)
    assert batch["status"] == "completed" and batch["request_counts"]["completed"] == 6
    # this market has no verifier: the owner is told before any miner starts, with the way out
    served = served_model_hash(system.model_dir).hex()
    assert f"warning: no verifier judges 0x{served} now" in submitted.stderr
    assert f"`market cancel {batch['id']}` refunds the escrow" in submitted.stderr
    status = market(system, "status", batch["id"], "--json")
    assert json.loads(status.stdout)["results_root"] == batch["results_root"]
    out = tmp_path / "out.jsonl"
    fetched = market(system, "results", batch["id"], "-o", str(out))
    assert fetched.returncode == 0, fetched.stderr
    assert "6 results" in fetched.stdout and "verified against the on-chain commitment" in fetched.stdout
    assert sorted(json.loads(row)["custom_id"] for row in out.read_text().splitlines()) == [
        f"cli-{i}" for i in range(6)
    ]
    listed = json.loads(market(system, "list", "--json").stdout)
    assert batch["id"] in [b["id"] for b in listed]
    refused = market(system, "cancel", batch["id"])
    assert refused.returncode == 1
    assert refused.stderr.strip() == (
        "error: a batch that is completed cannot be cancelled: its lines settle after the challenge window, "
        "refunding the unused budget"
    )


def test_cli_errors_are_one_line(system: LocalSystem, tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"custom_id": "a"\n')
    result = market(system, "submit", str(bad), "--model", "tiny/qwen3", "--max-price", "1")
    assert result.returncode == 1 and result.stderr.startswith(f"error: {bad}: line 1: malformed JSON")
    other = tmp_path / "other.jsonl"
    other.write_bytes(jsonl([chat_line("a", model="gpt-4o")]))
    result = market(system, "submit", str(other), "--model", "tiny/qwen3", "--max-price", "1")
    assert result.stderr.strip() == f"error: {other}: line 1 asks for model 'gpt-4o', not 'tiny/qwen3'"
    missing = market(system, "status", "batch_nope")
    assert missing.stderr.strip() == "error: no batch with id 'batch_nope'"


def test_a_cancelled_batch_pays_for_what_was_done(system: LocalSystem) -> None:
    client = system.client()
    lines = [chat_line(f"stop-{i}", f"tell me a long story number {i}", max_tokens=32) for i in range(256)]
    file = client.files.create(file=jsonl(lines), purpose="batch")
    batch = client.batches.create(input_file_id=file.id, endpoint="/v1/chat/completions", max_price=5 * UNIT)
    wait_for(lambda: client.batches.retrieve(batch.id).request_counts.completed > 0, poll=0.1)
    assert client.batches.cancel(batch.id).status == "cancelling"
    done = client.batches.wait(batch.id, poll_s=0.5, timeout_s=240)
    assert done.status == "cancelled"
    assert 0 < done.request_counts.completed < 256
    verified = client.batches.results(batch.id)
    assert len(verified.output) == done.request_counts.completed
    task = system.market.tasks.get_task(batch.task_id)
    assert task.status == TaskStatus.RESULTS_COMMITTED
    tokens = sum(v.leaf.input_tokens + v.leaf.output_tokens for v in verified.output)
    assert task.payment == tokens * system.config.price_per_million_tokens // 10**6
