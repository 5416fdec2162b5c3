"""A miner behind NAT serves through the coordinator's relay: two miners each lend memory for half of
SmolLM2, the second registers an endpoint where nothing listens and binds its stage inbox where no peer is
told, so the only way to it is the relay (`coordinator relay`). The coordinator finds it unreachable, plans
it through the relay, and the batch completes with exactly the outputs of a direct 2-stage pipeline (greedy
and seeded sampling), token for token, verified against the chain."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from client_sdk import openai_batch
from client_sdk.protocol.endpoint import tcp_connect_ms
from client_sdk.results import PROOF_KEY
from coordinator.db.models import Miner
from demo.batch_demo import batch_lines, real_model_config
from demo.system import UNIT, LocalSystem
from miner.pipeline.batch import RunSettings, run_batch
from tests.coordinator.helpers import jsonl

REQUESTS = 12


@pytest.fixture(scope="module")
def system(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalSystem]:
    workdir = tmp_path_factory.mktemp("relayed-system")
    with LocalSystem(workdir, real_model_config(relayed_miners=(1,))) as running:
        yield running


def completions(lines: list[dict[str, object]]) -> dict[str, tuple[str, int]]:
    """custom_id -> (answer text, completion tokens) of OpenAI Batch output lines."""
    out = {}
    for line in lines:
        body = line["response"]["body"]  # type: ignore[index]
        out[str(line["custom_id"])] = (
            body["choices"][0]["message"]["content"],
            body["usage"]["completion_tokens"],
        )
    return out


def test_a_miner_behind_nat_serves_through_the_relay_exactly_as_a_direct_pipeline(
    system: LocalSystem, tmp_path: Path
) -> None:
    lines = batch_lines(REQUESTS, system.config.model)  # greedy and seeded sampled chat questions
    client = system.client()
    file = client.files.create(file=jsonl(lines), purpose="batch")
    batch = client.batches.create(input_file_id=file.id, endpoint=openai_batch.CHAT, max_price=1 * UNIT)
    done = client.batches.wait(batch.id, poll_s=0.5, timeout_s=300)
    assert done.status == "completed", (system.workdir / "worker.log").read_text()[-3000:]
    verified = client.batches.results(batch.id)  # every line checked against the on-chain root
    assert verified.errors == []
    miners = sorted(m.address for m in system.miner_accounts)
    assert all(sorted(v.line[PROOF_KEY]["pipeline"]) == miners for v in verified.output)

    # the same file through a direct 2-stage pipeline of local processes
    (tmp_path / "input.jsonl").write_bytes(jsonl(lines))
    summary = run_batch(
        system.model_dir,
        tmp_path / "input.jsonl",
        tmp_path / "output.jsonl",
        tmp_path / "errors.jsonl",
        RunSettings(stages=2, offload=False),
    )
    assert summary.completed == REQUESTS
    direct = [json.loads(row) for row in (tmp_path / "output.jsonl").read_text().splitlines()]
    assert completions([v.line for v in verified.output]) == completions(direct)

    # it went through the relay: the coordinator could not reach the second miner, and the relay says so
    engine = sa.create_engine(system.database_url)
    with engine.connect() as connection:
        rows = {r.address: r for r in connection.execute(sa.select(Miner))}
    engine.dispose()
    direct_miner, relayed_miner = (rows[m.address] for m in system.miner_accounts)
    assert direct_miner.reachable and direct_miner.relay_endpoint is None
    assert not relayed_miner.reachable and relayed_miner.relay_endpoint == system.relay_endpoint
    assert (
        tcp_connect_ms(relayed_miner.endpoint, timeout_s=0.5) is None
    )  # nothing listens where it registered
    relay_log = (system.workdir / "relay.log").read_text()
    assert f"relaying to {relayed_miner.link_key}" in relay_log and "relay dropped" not in relay_log
    assert "peers reach this node through the relay" in (system.workdir / "miner1.log").read_text()
    assert "directly reachable at" in (system.workdir / "miner0.log").read_text()
