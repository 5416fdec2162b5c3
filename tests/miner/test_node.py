"""`miner serve`'s stages across nodes: stage hosts wired by an assignment serve a unit exactly as one
whole-model stage does; every stage journals the lines it helped produce under the task and line the
request id names; each stage checks a line before signing (the request's prompt, the result line, the leaf
in the root); a new assignment rebuilds the stage on the same endpoint."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from eth_account import Account

from client_sdk import openai_batch
from client_sdk.eip712 import recover_signer
from client_sdk.inputs import custom_id_hash, line_hash
from client_sdk.merkle import MerkleTree
from client_sdk.results import ResultLeaf, output_hash
from miner.node.executor import HeadExecutor
from miner.node.journal import Journal, Served
from miner.node.requests import Reader, request_id, task_and_line
from miner.node.signer import RefusedToSign, check_and_sign, commitment_of
from miner.pipeline.ledger import RequestRecord
from miner.tiny_checkpoint import build_tiny_model
from tests.miner.nodes import assignments, ignore, reader_for, stage_hosts

TASK = 41
CHAIN_ID = 31337
REGISTRY = "0x" + "11" * 20
HEAD, SECOND = Account.create(), Account.create()


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("node-model"))


@pytest.fixture(scope="module")
def reader(checkpoint: Path) -> Reader:
    return reader_for(checkpoint)


def unit_lines(count: int) -> list[dict[str, Any]]:
    lines = []
    for i in range(count):
        body = {"model": "tiny", "prompt": f"The number {i} is", "max_tokens": 6 + i % 5, "temperature": 0.7}
        line = {"custom_id": f"c-{i}", "method": "POST", "url": "/v1/completions", "body": body}
        lines.append({"index": i, "line": json.dumps(line)})
    return lines


@pytest.fixture(scope="module")
def two_stage_run(checkpoint: Path, reader: Reader, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A unit through a 2-stage pipeline of hosts; the second stage journals what it saw."""
    journal = Journal(tmp_path_factory.mktemp("second") / "served.jsonl")

    def sink(request: int, record: RequestRecord) -> None:
        journal.record(*task_and_line(request), Served(tuple(record.prompt), tuple(record.output)))

    with stage_hosts(checkpoint, [(0, 2), (2, 4)], [ignore, sink]) as [head, _]:
        assert head.driver is not None
        served = dict(HeadExecutor(reader).run(TASK, unit_lines(12), head.driver))
        # the last finish notices reach the second stage with the head's next step, a moment later
        deadline = time.monotonic() + 30
        while len(journal.served) < len(served) and time.monotonic() < deadline:
            time.sleep(0.05)
    return served, journal


def test_request_ids_carry_the_task_and_the_line() -> None:
    assert task_and_line(request_id(TASK, 7)) == (TASK, 7)
    assert request_id(2**31 - 1, 2**32 - 1) < 2**63
    with pytest.raises(ValueError, match="does not fit"):
        request_id(2**31, 0)


def test_two_stage_hosts_serve_like_one_whole_stage(
    checkpoint: Path, reader: Reader, two_stage_run: Any
) -> None:
    served, _ = two_stage_run
    with stage_hosts(checkpoint, [(0, 4)]) as [whole]:
        assert whole.driver is not None
        alone = dict(HeadExecutor(reader).run(TASK, unit_lines(12), whole.driver))
    assert sorted(served) == list(range(12))
    assert served == alone


def test_every_stage_journals_the_lines_it_served(two_stage_run: Any) -> None:
    served, journal = two_stage_run
    assert journal.served == {(TASK, index): line for index, line in served.items()}
    reloaded = Journal(journal.path)  # after a crash, the node signs from the file
    assert reloaded.served == journal.served


def signing_request(
    reader: Reader, served: dict[int, Served], tamper: dict[int, Any] | None = None
) -> dict[str, Any]:
    """What the coordinator sends: the commitment and, per line, the request, the result line, the pipeline
    and the Merkle proof."""
    pipeline = (HEAD.address, SECOND.address)
    rows = {item["index"]: item["line"] for item in unit_lines(12)}
    lines, leaves = [], []
    for index, mine in sorted(served.items()):
        request = openai_batch.parse_line(rows[index], index + 1)
        result = reader.result_line(TASK, index, request, 1_700_000_000, len(mine.prompt), mine.output)
        leaves.append(
            ResultLeaf(
                TASK,
                index,
                custom_id_hash(request.custom_id),
                line_hash(request.raw),
                output_hash(result),
                len(mine.prompt),
                len(mine.output),
                pipeline,
            )
        )
        lines.append({"index": index, "request": rows[index], "line": result, "pipeline": list(pipeline)})
    tree = MerkleTree([leaf.hash() for leaf in leaves])
    for position, item in enumerate(lines):
        item["proof"] = ["0x" + p.hex() for p in tree.proof(position)]
        item.update((tamper or {}).get(item["index"], {}))
    commitment = {
        "results_root": "0x" + tree.root.hex(),
        "input_tokens": sum(leaf.input_tokens for leaf in leaves),
        "output_tokens": sum(leaf.output_tokens for leaf in leaves),
        "payment": 1000,
        "miner_amounts": [600, 400],
    }
    return {"batch_id": "batch_x", "task_id": TASK, "commitment": commitment, "lines": lines}


def test_each_stage_signs_after_checking_its_lines(reader: Reader, two_stage_run: Any) -> None:
    served, journal = two_stage_run
    request = signing_request(reader, served)
    signature = check_and_sign(SECOND, request, journal.served, reader, CHAIN_ID, REGISTRY)
    commitment = commitment_of(TASK, request["commitment"])
    assert recover_signer(signature, commitment, CHAIN_ID, REGISTRY) == SECOND.address


def test_a_stage_refuses_what_it_did_not_serve(reader: Reader, two_stage_run: Any) -> None:
    served, journal = two_stage_run
    honest = signing_request(reader, served)
    other_request = unit_lines(12)[3]["line"]
    line = honest["lines"][5]["line"]
    edited = json.loads(json.dumps(line))
    edited["response"]["body"]["choices"][0]["text"] += "!"
    cases = {
        "the prompt we were fed is not this request's": {5: {"request": other_request}},
        "the result differs from what we produced": {5: {"line": edited}},
        "its leaf is not in the committed root": {5: {"proof": []}},
    }
    for reason, tamper in cases.items():
        with pytest.raises(RefusedToSign, match=f"task {TASK} line 5: {reason}"):
            check_and_sign(
                SECOND, signing_request(reader, served, tamper), journal.served, reader, CHAIN_ID, REGISTRY
            )
    with pytest.raises(RefusedToSign, match="line 0: we have no record of serving it"):
        check_and_sign(SECOND, honest, {}, reader, CHAIN_ID, REGISTRY)
    with pytest.raises(RefusedToSign, match="not in the committed root"):  # we are not in its pipeline
        check_and_sign(Account.create(), honest, journal.served, reader, CHAIN_ID, REGISTRY)


def test_a_new_assignment_rebuilds_the_stage_on_the_same_endpoint(checkpoint: Path, reader: Reader) -> None:
    lines = unit_lines(4)
    with stage_hosts(checkpoint, [(0, 1), (1, 4)]) as [head, second]:
        assert head.driver is not None
        before = dict(HeadExecutor(reader).run(TASK, lines, head.driver))
        assert head.assignment is not None and second.assignment is not None
        where = head.assignment.endpoints
        for host, moved in zip((head, second), assignments([(0, 3), (3, 4)], where), strict=True):
            assert host.follow(moved)
            assert not host.follow(moved)  # the same assignment again changes nothing
        assert head.driver is not None
        after = dict(HeadExecutor(reader).run(TASK + 1, lines, head.driver))
        assert second.assignment is not None and (second.assignment.start, second.assignment.end) == (3, 4)
    assert after == before


def test_units_in_flight_together_finish_in_any_order(
    checkpoint: Path, reader: Reader, two_stage_run: Any
) -> None:
    served, _ = two_stage_run
    lines = unit_lines(12)
    executor = HeadExecutor(reader)
    with stage_hosts(checkpoint, [(0, 2), (2, 4)]) as [head, _]:
        assert head.driver is not None
        first = executor.start(TASK, lines[:6], head.driver)
        second = executor.start(TASK, lines[6:], head.driver)
        later = dict(executor.finish(second, head.driver))  # the first unit's completions wait meanwhile
        earlier = dict(executor.finish(first, head.driver))
    assert earlier | later == served
