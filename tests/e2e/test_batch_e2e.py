"""The main job end to end: a user submits a batch with the SDK and pays once; the coordinator plans one
2-stage pipeline over two live miners (each lends memory for half the model), dispatches units to its head,
collects, gets both stages' signatures and commits on-chain; the SDK verifies every line against the chain;
after the challenge window everyone is paid exactly what the commitment says."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
from eth_account import Account
from prometheus_client.parser import text_string_to_metric_families

from client_sdk.chain.types import ChallengeStatus
from client_sdk.client import Batch
from client_sdk.eip712 import ResultCommitment, sign_commitment
from client_sdk.protocol.task import TaskStatus
from client_sdk.results import PROOF_KEY
from client_sdk.verify import ResultsRejected, check_commitment, check_inputs, check_lines
from demo.system import UNIT, LocalSystem, SystemConfig
from tests.coordinator.helpers import chat_line, jsonl
from tests.e2e.conftest import wait_for

REQUESTS = 24
MAX_PRICE = 5 * UNIT


@pytest.fixture(scope="module")
def system(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalSystem]:
    """Two miners that only together hold the model; units of 8 requests."""
    with LocalSystem(tmp_path_factory.mktemp("system"), SystemConfig(work_unit_size=8, stages=2)) as running:
        yield running


@dataclass(frozen=True)
class Done:
    batch: Batch
    wallet_before: int


@pytest.fixture(scope="module")
def done(system: LocalSystem) -> Done:
    lines = [
        chat_line(f"req-{i}", f"question {i}: what is {i} plus {i}?", max_tokens=4 + i % 5)
        for i in range(REQUESTS)
    ]
    client = system.client()
    before = system.market.token.balance_of(system.user.address)
    file = client.files.create(file=jsonl(lines), purpose="batch")
    batch = client.batches.create(input_file_id=file.id, endpoint="/v1/chat/completions", max_price=MAX_PRICE)
    finished = client.batches.wait(batch.id, poll_s=0.5, timeout_s=240)
    assert finished.status == "completed", (system.workdir / "worker.log").read_text()[-3000:]
    return Done(finished, before)


def test_the_batch_completes_with_every_line_once(system: LocalSystem, done: Done) -> None:
    client = system.client()
    assert system.market.token.balance_of(system.user.address) == done.wallet_before - MAX_PRICE
    assert done.batch.request_counts.total == done.batch.request_counts.completed == REQUESTS
    assert done.batch.output_file_id is not None and done.batch.error_file_id is None
    output = [
        json.loads(row) for row in client.files.content(done.batch.output_file_id).decode().splitlines()
    ]
    assert sorted(line["custom_id"] for line in output) == sorted(f"req-{i}" for i in range(REQUESTS))
    miners = [m.address for m in system.miner_accounts]
    assert all(sorted(line[PROOF_KEY]["pipeline"]) == sorted(miners) for line in output)  # both stages


# what a node asks about news; its heartbeats and waits are the rest
POLLED_ROUTES = (
    "/v1/miners/acceptances",
    "/v1/miners/signing",
    "/v1/miners/work/claim",
    "/v1/miners/assignment",
)


def miner_requests(system: LocalSystem) -> Counter[str]:
    """The API's request counts per miner route so far (its /metrics)."""
    counts: Counter[str] = Counter()
    for family in text_string_to_metric_families(httpx.get(system.api_url + "/metrics").text):
        for sample in family.samples:
            if sample.name == "batchmarket_http_requests_total":
                counts[sample.labels["route"]] += int(sample.value)
    return counts


def test_idle_miners_only_heartbeat_and_wait_for_news(system: LocalSystem, done: Done) -> None:
    """Once the batch is done and nothing changes, the nodes send heartbeats and long waits, not polls (they
    polled two or three routes every half second: 40 to 60 requests a node in 10 s)."""
    time.sleep(2)  # the settling steps' last news read
    before = miner_requests(system)
    time.sleep(10)
    sent = miner_requests(system) - before
    nodes = len(system.miner_accounts)
    assert sum(sent[route] for route in POLLED_ROUTES) <= 4 * nodes, sent  # a round of reads on news
    beats = 10 / system.config.heartbeat_s + 1
    assert sent["/v1/miners/heartbeat"] <= beats * nodes, sent
    assert sent["/v1/miners/wake"] <= 2 * nodes, sent  # a 25 s wait, again after each news


def test_results_verify_against_the_chain(system: LocalSystem, done: Done) -> None:
    results = system.client().batches.results(done.batch.id)
    assert len(results.output) == REQUESTS and results.errors == []
    task = system.market.tasks.get_task(done.batch.task_id)
    assert task.status == TaskStatus.RESULTS_COMMITTED
    assert sum(v.leaf.input_tokens for v in results.output) == task.input_tokens
    assert sum(v.leaf.output_tokens for v in results.output) == task.output_tokens
    assert (
        task.payment
        == (task.input_tokens + task.output_tokens) * system.config.price_per_million_tokens // 10**6
    )


def test_a_tampered_output_line_is_rejected_naming_it(system: LocalSystem, done: Done) -> None:
    client = system.client()
    rows = client.files.content(done.batch.output_file_id or "").decode().splitlines()
    line = json.loads(rows[2])
    line["response"]["body"]["choices"][0]["message"]["content"] += "!"
    rows[2] = json.dumps(line)
    committed = client.http.get(f"/v1/batches/{done.batch.id}/commitment").json()
    verified = check_commitment(
        system.market, done.batch.task_id, committed["commitment"], committed["signatures"]
    )
    input_file = client.files.content(done.batch.input_file_id)
    inputs = check_inputs(done.batch.task_id, verified.input_root, input_file)
    with pytest.raises(
        ResultsRejected, match=rf"result line 3 \(custom_id '{line['custom_id']}'\): not part of"
    ):
        check_lines(done.batch.task_id, verified, "\n".join(rows).encode(), inputs)
    # the line as committed, but naming one more miner on its pipeline, one that vouched for nothing
    honest = json.loads(client.files.content(done.batch.output_file_id or "").decode().splitlines()[2])
    honest[PROOF_KEY]["pipeline"].append("0x" + "99" * 20)
    honest[PROOF_KEY]["served_proofs"].append([])
    rows[2] = json.dumps(honest)
    with pytest.raises(ResultsRejected, match="result line 3"):
        check_lines(done.batch.task_id, verified, "\n".join(rows).encode(), inputs)


def test_a_forged_signature_or_root_is_rejected(system: LocalSystem, done: Done) -> None:
    committed = system.client().http.get(f"/v1/batches/{done.batch.id}/commitment").json()
    commitment, signatures = committed["commitment"], committed["signatures"]
    assert (
        check_commitment(system.market, done.batch.task_id, commitment, signatures).root.hex()
        in done.batch.results_root
    )
    c = ResultCommitment.from_json(done.batch.task_id, commitment)
    impostor = Account.create()
    miner = system.market.tasks.miners_of(done.batch.task_id)[0]
    forged = sign_commitment(
        impostor, c, miner, system.anvil.w3.eth.chain_id, system.market.deployment.task_registry
    )
    bad = [dict(signatures[0], signature="0x" + forged.hex()), *signatures[1:]]
    with pytest.raises(ResultsRejected, match="signature is not by the signer it accepted the task with"):
        check_commitment(system.market, done.batch.task_id, commitment, bad)
    other_root = dict(commitment, results_root="0x" + "11" * 32)
    with pytest.raises(ResultsRejected, match="commitment differs from the one on-chain"):
        check_commitment(system.market, done.batch.task_id, other_root, signatures)
    swapped = dict(commitment, served_roots=commitment["served_roots"][::-1])
    if swapped != commitment:
        with pytest.raises(ResultsRejected, match="served roots differ from the ones on-chain"):
            check_commitment(system.market, done.batch.task_id, swapped, signatures)


def test_the_owners_challenges_of_lines_are_answered_by_the_coordinator(
    system: LocalSystem, done: Done
) -> None:
    """The owner challenges a line that billed tokens and the last one; the worker answers both with their
    leaves and proofs, the task is no longer held, and its window is extended by the wait."""
    market, task_id = system.market, done.batch.task_id
    owner = market.as_account(system.user).challenges
    window_ends = market.tasks.challenge_ends_at(task_id)
    for index in (0, REQUESTS - 1):
        owner.challenge_line(task_id, index)
    assert market.tasks.get_task(task_id).status == TaskStatus.DISPUTED

    wait_for(lambda: not market.challenges.open_challenges(task_id))
    for index in (0, REQUESTS - 1):
        assert market.challenges.challenge_of(task_id, index).status == ChallengeStatus.ANSWERED
    assert market.tasks.get_task(task_id).status == TaskStatus.RESULTS_COMMITTED
    assert market.tasks.challenge_ends_at(task_id) >= window_ends


def test_after_the_window_everyone_is_paid_exactly(system: LocalSystem, done: Done) -> None:
    market, task_id = system.market, done.batch.task_id
    task = market.tasks.get_task(task_id)
    system.advance_chain_time(system.config.challenge_window + 1)
    wait_for(lambda: market.tasks.get_task(task_id).status == TaskStatus.FINALIZED)
    fee = task.payment * system.config.fee_bps // 10_000
    amounts = market.tasks.miner_amounts_of(task_id)
    assert sum(amounts) == task.payment - fee and all(a > 0 for a in amounts)
    assert market.escrow.balance_of(system.user.address) == MAX_PRICE - task.payment
    assert market.escrow.balance_of(system.coordinator.address) == fee
    for miner, amount in zip(market.tasks.miners_of(task_id), amounts, strict=True):
        assert market.escrow.balance_of(miner) == amount
    stakes = [market.registry.stake_of(m) for m in market.tasks.miners_of(task_id)]
    assert all(s.locked == 0 and s.free == system.config.miner_stake for s in stakes)
