"""`miner serve`'s stages across nodes: stage hosts wired by an assignment serve a unit exactly as one
whole-model stage does; every stage journals the lines it helped produce under the task and line the
request id names; each stage checks a line before signing (the request's prompt, the result line, the leaf
in the root); a new assignment rebuilds the stage on the same endpoint; the head publishes its lines'
progress, which the node reports per unit, and a head given a unit with lines' output so far resumes them."""

from __future__ import annotations

import dataclasses
import json
import re
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import zmq
from eth_account import Account
from eth_account.signers.local import LocalAccount

from client_sdk import openai_batch
from client_sdk.chain.anvil import free_port
from client_sdk.device import DeviceProfile
from client_sdk.eip712 import ResultCommitment, recover_signer
from client_sdk.inputs import custom_id_hash, line_hash
from client_sdk.protocol.endpoint import tcp_connect_ms
from client_sdk.protocol.sampling import SamplingParams
from client_sdk.protocol.settlement import split
from client_sdk.protocol.signing import SigningLine, SigningRequest
from client_sdk.results import ResultLeaf, ResultTrees, output_hash, served_tree
from miner.model.shard import StageShard
from miner.node import serve as serve_module
from miner.node.coordinator_client import CoordinatorError
from miner.node.executor import HeadExecutor, Started
from miner.node.journal import Journal, Served
from miner.node.links import listening
from miner.node.requests import Reader, request_id, task_and_line
from miner.node.serve import Node, NodeConfig
from miner.node.signer import RefusedToSign, Unrecorded, check_and_sign, check_tree
from miner.node.stage_host import HostSettings, StageAssignment, in_flight_cache
from miner.pipeline.driver import PipelineDriver
from miner.pipeline.ledger import RequestRecord
from miner.pipeline.stage import Links, StageWorker
from miner.tiny_checkpoint import build_tiny_model
from miner.transport.relay import RelayAddress
from miner.transport.security import LinkKeys
from tests.miner.nodes import CACHE, assignments, ignore, reader_for, stage_hosts

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


def unit_lines(count: int, seeded: bool = False) -> list[dict[str, Any]]:
    """Sampled lines; unseeded ones draw with seeds derived from the task and the custom_id."""
    lines = []
    for i in range(count):
        body = {"model": "tiny", "prompt": f"The number {i} is", "max_tokens": 6 + i % 5, "temperature": 0.7}
        if seeded:
            body["seed"] = 100 + i
        line = {"custom_id": f"c-{i}", "method": "POST", "url": "/v1/completions", "body": body}
        lines.append({"index": i, "line": json.dumps(line)})
    return lines


def run_on_two_stages(
    checkpoint: Path, reader: Reader, lines: list[dict[str, Any]], journal: Journal
) -> dict[int, Served]:
    """A unit through a 2-stage pipeline of hosts; the second stage (layers 2 to 4) journals what it saw."""

    def sink(request: int, record: RequestRecord) -> None:
        journal.record(*task_and_line(request), Served(tuple(record.prompt), tuple(record.output), 2))

    with stage_hosts(checkpoint, [(0, 2), (2, 4)], [ignore, sink]) as [head, _]:
        assert head.driver is not None
        served = dict(HeadExecutor(reader).run(TASK, lines, head.driver))
        # the last finish notices reach the second stage with the head's next step, a moment later
        deadline = time.monotonic() + 30
        while len(journal.served) < len(served) and time.monotonic() < deadline:
            time.sleep(0.05)
    return served


@pytest.fixture(scope="module")
def two_stage_run(checkpoint: Path, reader: Reader, tmp_path_factory: pytest.TempPathFactory) -> Any:
    journal = Journal(tmp_path_factory.mktemp("second") / "served.jsonl")
    return run_on_two_stages(checkpoint, reader, unit_lines(12), journal), journal


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
    assert journal.served == {
        (TASK, index): dataclasses.replace(line, layers=2) for index, line in served.items()
    }
    reloaded = Journal(journal.path)  # after a crash, the node signs from the file
    assert reloaded.served == journal.served


def test_lines_resumed_from_their_first_tokens_end_as_uninterrupted(
    checkpoint: Path, reader: Reader, two_stage_run: Any, tmp_path: Path
) -> None:
    """Another head takes the unit over with the tokens its lines had so far (1 to all but one): its 2-stage
    pipeline re-prefills them and samples the same rest; every stage records the whole output. Line 0 comes
    with a token its first run did not draw, and its output starts with it: resumed tokens are not redrawn."""
    served, _ = two_stage_run
    lines = unit_lines(12)
    for item in lines:
        output = served[item["index"]].output
        item["resume"] = list(output[: item["index"] % len(output)])
    first = served[0].output[0]
    forged = next(t for t in range(10, reader.config.vocab_size) if t != first and t not in reader.stops)
    lines[0]["resume"] = [forged]
    journal = Journal(tmp_path / "served.jsonl")
    resumed = run_on_two_stages(checkpoint, reader, lines, journal)
    assert sum(1 for item in lines if item["resume"]) > len(lines) // 2
    assert {i: line for i, line in resumed.items() if i != 0} == {
        i: line for i, line in served.items() if i != 0
    }
    assert resumed[0].prompt == served[0].prompt and resumed[0].output[0] == forged
    assert journal.served == {
        (TASK, index): dataclasses.replace(line, layers=2) for index, line in resumed.items()
    }


def test_a_line_that_cannot_resume_from_what_it_came_with_runs_from_its_prompt(
    checkpoint: Path, reader: Reader, two_stage_run: Any
) -> None:
    served, _ = two_stage_run
    vocab, stop = reader.config.vocab_size, reader.stops[0]
    bad = [[vocab], [-1], "tokens", [1] * 64, [1, stop], [True]]
    lines = unit_lines(len(bad))
    for item, resume in zip(lines, bad, strict=True):
        item["resume"] = resume
    with stage_hosts(checkpoint, [(0, 4)]) as [whole]:
        assert whole.driver is not None
        rerun = dict(HeadExecutor(reader).run(TASK, lines, whole.driver))
    assert rerun == {index: served[index] for index in range(len(bad))}


def test_the_head_stage_publishes_each_steps_progress_as_a_new_snapshot(checkpoint: Path) -> None:
    """The node reads the head's progress from another thread: after each step's tokens the stage replaces
    the snapshot whole, so one already read never changes. Both stages are stepped by hand, one message at a
    time."""
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    driver = PipelineDriver(context)
    head = StageWorker(StageShard.load(checkpoint, 0, 2), CACHE, context)
    tail = StageWorker(StageShard.load(checkpoint, 2, 4), CACHE, context)
    try:
        head.connect(Links(next_stage=tail.inbox.endpoint, driver=driver.endpoint))
        tail.connect(Links(first_stage=head.inbox.endpoint))
        driver.connect(head.inbox.endpoint)
        driver.submit([(1, [5, 6, 7], SamplingParams(max_tokens=3))], resume={1: [11]})

        def one_message(worker: StageWorker) -> None:
            worker.serve(keep_going=iter([True, False]).__next__, poll_ms=30_000)

        one_message(head)  # the submit: the first step goes to the tail
        assert head.progress == {}  # nothing sampled yet
        one_message(tail)
        one_message(head)  # the first step's token
        first = head.progress
        assert list(first) == [1] and len(first[1]) == 2 and first[1][0] == 11
        one_message(tail)
        one_message(head)  # the last token: the request finished
        assert head.progress == {} and len(first[1]) == 2
        assert driver.wait_for([1])[1][:2] == first[1]
    finally:
        for closeable in (head, tail, driver):
            closeable.close()
        context.term()


class ProgressLog:
    """A coordinator client that records progress reports; it refuses those of `refused` units."""

    def __init__(self, refused: int) -> None:
        self.refused = refused
        self.reports: dict[int, list[dict[str, Any]]] = {}

    def progress(self, unit_id: int, lines: list[dict[str, Any]]) -> int:
        if unit_id == self.refused:
            raise CoordinatorError(409, "work unit is not leased to you any more")
        self.reports[unit_id] = lines
        return len(lines)


def test_a_head_reports_the_progress_of_each_unit_in_hand(
    checkpoint: Path, reader: Reader, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each unit's lines with tokens so far go to the coordinator under that unit; a refused report does not
    stop the others."""
    config = NodeConfig("tiny", "tcp://127.0.0.1:1", "us-east-1", CHAIN_ID, REGISTRY)
    device = DeviceProfile("cpu", 1.0, 1.0, 1.0, 1.0)
    client = ProgressLog(refused=3)
    settings = HostSettings(checkpoint, "tcp://127.0.0.1:1", CACHE)
    journal = Journal(tmp_path / "served.jsonl")
    node = Node(config, HEAD, client, device, settings, HeadExecutor(reader), journal)  # type: ignore[arg-type]
    try:
        # units 3 (refused), 5 and 8 in hand; unit 8's lines have no tokens yet
        line = {index: request_id(TASK, index) for index in range(10)}
        node.serving = {3: [line[0]], 5: [line[4], line[5]], 8: [line[9]]}
        snapshot = {line[0]: (1,), line[5]: (7, 8), line[6]: (2,)}  # line 6: in no unit of ours
        monkeypatch.setattr(node.host, "progress", lambda: snapshot)
        node._report_progress(client)  # type: ignore[arg-type]
    finally:
        node.host.close()
    assert client.reports == {5: [{"index": 5, "output_token_ids": [7, 8]}]}


class Unreachable:
    """A coordinator client whose coordinator is down for its first `down` submissions, then takes them."""

    def __init__(self, down: int) -> None:
        self.down = down
        self.submitted: list[tuple[int, list[dict[str, Any]]]] = []

    def submit(self, unit_id: int, results: list[dict[str, Any]]) -> int:
        if self.down:
            self.down -= 1
            raise CoordinatorError(0, "cannot reach the coordinator at http://127.0.0.1:1")
        self.submitted.append((unit_id, results))
        return len(results)


def test_results_finished_while_the_coordinator_is_down_are_kept_and_delivered(
    checkpoint: Path, reader: Reader, tmp_path: Path
) -> None:
    """A unit served during an outage keeps its results (and its lease: it stays in hand for the heartbeats)
    until the coordinator answers again; nothing is served twice."""
    config = NodeConfig("tiny", "tcp://127.0.0.1:1", "us-east-1", CHAIN_ID, REGISTRY)
    device = DeviceProfile("cpu", 1.0, 1.0, 1.0, 1.0)
    client = Unreachable(down=2)
    settings = HostSettings(checkpoint, "tcp://127.0.0.1:1", CACHE)
    node = Node(
        config, HEAD, client, device, settings, HeadExecutor(reader), Journal(tmp_path / "served.jsonl")
    )  # type: ignore[arg-type]
    try:
        served = [(0, Served((1, 2, 3), (4, 5))), (1, Served((6,), (7,)))]
        node.serving = {9: [request_id(TASK, 0), request_id(TASK, 1)]}
        node._report(
            {"unit_id": 9, "task_id": TASK, "batch_id": "batch_x"}, served
        )  # the coordinator is down
        assert client.submitted == [] and 9 in node.serving
        assert node._deliver() is False  # still down
        assert node._deliver() is True  # back: the results go, once
        assert node._deliver() is False
    finally:
        node.host.close()
    assert [unit for unit, _ in client.submitted] == [9] and node.serving == {}
    assert [(r["index"], r["output_token_ids"]) for r in client.submitted[0][1]] == [(0, [4, 5]), (1, [7])]


class StartingCoordinator:
    """A coordinator client whose coordinator answers joins only from its `down`-th call on (before that it is
    unreachable, then not ready), or refuses them with `refusal`."""

    def __init__(self, down: int, refusal: int | None = None) -> None:
        self.down, self.refusal, self.joins = down, refusal, 0

    def join(self, *_args: object) -> dict[str, Any]:
        self.joins += 1
        if self.refusal is not None:
            raise CoordinatorError(self.refusal, "this address is not registered on-chain")
        if self.joins <= self.down:
            status = 0 if self.joins == 1 else 503
            raise CoordinatorError(status, "cannot reach the coordinator" if status == 0 else "not ready")
        return {"reachable": True}


def test_a_node_started_before_its_coordinator_joins_once_it_answers(
    checkpoint: Path, reader: Reader, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(serve_module, "JOIN_RETRY_S", 0.01)
    config = NodeConfig("tiny", f"tcp://127.0.0.1:{free_port()}", "us-east-1", CHAIN_ID, REGISTRY)
    device = DeviceProfile("cpu", 1.0, 1.0, 1.0, 1.0)
    settings = HostSettings(checkpoint, config.endpoint, CACHE)
    for client, joined in ((StartingCoordinator(down=3), True), (StartingCoordinator(down=10**6), False)):
        node = Node(
            config, HEAD, client, device, settings, HeadExecutor(reader), Journal(tmp_path / "j.jsonl")
        )  # type: ignore[arg-type]
        stop = threading.Event()
        if not joined:  # this coordinator never comes up: the node is stopped while it waits
            threading.Timer(0.5, stop.set).start()
        try:
            assert node._join(stop) is joined
        finally:
            node.host.close()
        assert client.joins == 4 if joined else client.joins > 1
    refused = StartingCoordinator(down=0, refusal=403)
    node = Node(config, HEAD, refused, device, settings, HeadExecutor(reader), Journal(tmp_path / "j.jsonl"))  # type: ignore[arg-type]
    try:
        with pytest.raises(CoordinatorError, match="not registered"):  # not a coordinator still starting
            node._join(threading.Event())
    finally:
        node.host.close()
    assert refused.joins == 1


class AwayCoordinator:
    """A coordinator client while the coordinator is away (every claim fails), that records the units given
    back once it answers."""

    def __init__(self) -> None:
        self.given_back: list[int] = []

    def claim(self) -> None:
        raise CoordinatorError(0, "cannot reach the coordinator")

    def give_back(self, unit_ids: list[int]) -> None:
        self.given_back += unit_ids


def test_units_in_flight_are_given_up_when_the_node_follows_a_new_assignment(
    checkpoint: Path, reader: Reader, tmp_path: Path
) -> None:
    """A new assignment read while the coordinator was away (the claim fails, so the unit in flight is not
    waited on) rebuilds the stage: the unit went down with the old one and is given back at once, instead of
    being waited on through the new stage until the driver's idle timeout (120 s)."""
    config = NodeConfig("tiny", "tcp://127.0.0.1:1", "us-east-1", CHAIN_ID, REGISTRY)
    device = DeviceProfile("cpu", 1.0, 1.0, 1.0, 1.0)
    client = AwayCoordinator()
    settings = HostSettings(checkpoint, f"tcp://127.0.0.1:{free_port()}", CACHE)
    node = Node(config, HEAD, client, device, settings, HeadExecutor(reader), Journal(tmp_path / "j.jsonl"))  # type: ignore[arg-type]
    try:
        node.serving = {3: [request_id(TASK, 0)]}
        node.in_flight.append(({"unit_id": 3, "task_id": TASK}, Started([], [request_id(TASK, 0)])))
        [node.wanted] = assignments([(0, 4)], (settings.listen,))
        with pytest.raises(CoordinatorError):  # the claim after it: the coordinator is still away
            node._step()
    finally:
        node.host.close()
    assert (client.given_back, list(node.in_flight), node.serving) == ([3], [], {})


def signing_request(
    reader: Reader, served: dict[int, Served], tamper: dict[int, Any] | None = None, spare: str | None = None
) -> dict[str, Any]:
    """What the coordinator sends: the commitment, the usage witness, the assigned miners (the two stages, 2
    layers each, and `spare` if given) with their work weights and, per line, the request, the result line,
    the pipeline and the Merkle proof."""
    pipeline = (HEAD.address, SECOND.address)
    miners = (*pipeline, spare) if spare else pipeline
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
        lines.append((index, rows[index], result))
    trees = ResultTrees(leaves, miners)
    stage_work = (trees.usage.input_tokens + trees.usage.output_tokens) * 2
    weights = (stage_work, stage_work, 0)[: len(miners)]
    commitment = ResultCommitment(
        TASK,
        trees.root,
        sum(leaf.input_tokens for leaf in leaves),
        sum(leaf.output_tokens for leaf in leaves),
        1000,
        tuple(split(1000, list(weights))),
        trees.served_roots(),
        miners,
        len(leaves),
    )
    request = SigningRequest(
        batch_id="batch_x",
        commitment=commitment,
        request_count=len(leaves),
        lines=tuple(SigningLine(i, row, result, pipeline, tuple(trees.proof(i))) for i, row, result in lines),
        leaves=tuple(trees.leaves),
        witness=trees.leaves[0],
        witness_proof=tuple(trees.proof(0)),
        miners=miners,
        weights=weights,
    ).to_json()
    for item in request["lines"]:
        item.update((tamper or {}).get(item["index"], {}))
    return request


def test_each_stage_signs_after_checking_its_lines(reader: Reader, two_stage_run: Any) -> None:
    served, journal = two_stage_run
    request = signing_request(reader, served)
    signed = check_and_sign(SECOND, SECOND.address, request, journal.served, reader, CHAIN_ID, REGISTRY)
    commitment = ResultCommitment.from_json(TASK, request["commitment"])
    assert commitment.served_roots[1] != bytes(32)  # the second stage's, as the coordinator computed it
    assert recover_signer(signed.signature, commitment, SECOND.address, CHAIN_ID, REGISTRY) == SECOND.address
    assert signed.commitment == commitment
    assert signed.trees.root == commitment.results_root  # kept to answer the owner's challenges


def own_signer() -> tuple[LocalAccount, str]:
    """A miner that is its own signer: its key and its address."""
    account = Account.create()
    return account, account.address


def test_a_stage_with_a_separate_signer_key_signs_for_its_account(reader: Reader, two_stage_run: Any) -> None:
    """A node whose signer is a key apart from its account checks its lines as the account's (the leaves
    name the account) and signs with the signer key a digest that names the account: the signature recovers
    to the signer for that miner, and to no one useful for another."""
    served, journal = two_stage_run
    request = signing_request(reader, served)
    signer = Account.create()
    signed = check_and_sign(signer, SECOND.address, request, journal.served, reader, CHAIN_ID, REGISTRY)
    commitment = ResultCommitment.from_json(TASK, request["commitment"])
    assert recover_signer(signed.signature, commitment, SECOND.address, CHAIN_ID, REGISTRY) == signer.address
    assert recover_signer(signed.signature, commitment, HEAD.address, CHAIN_ID, REGISTRY) != signer.address
    with pytest.raises(RefusedToSign, match="its leaf does not name us"):  # the signer's address served none
        check_and_sign(signer, signer.address, request, journal.served, reader, CHAIN_ID, REGISTRY)


def test_a_stage_refuses_a_commitment_that_does_not_carry_its_served_root(
    reader: Reader, two_stage_run: Any
) -> None:
    """The signature covers every miner's served root: a stage signs only a commitment whose root for it is
    the root of exactly the lines it served."""
    served, journal = two_stage_run
    request = signing_request(reader, served)
    request["commitment"]["served_roots"][1] = "0x" + "11" * 32
    with pytest.raises(RefusedToSign, match=f"miner {SECOND.address}'s served root is not the root of its"):
        check_and_sign(SECOND, SECOND.address, request, journal.served, reader, CHAIN_ID, REGISTRY)
    request["commitment"]["served_roots"][1] = "0x" + "00" * 32  # left out: the head answers for the lines
    with pytest.raises(RefusedToSign, match="does not carry the root of the lines we served"):
        check_and_sign(SECOND, SECOND.address, request, journal.served, reader, CHAIN_ID, REGISTRY)


def _retreed(
    request: SigningRequest, leaves: list[ResultLeaf], roots: tuple[bytes, ...] | None = None
) -> SigningRequest:
    """`request` with its leaves replaced by `leaves` and its commitment made from them (served roots `roots`
    where given), as a coordinator would send it."""
    trees = ResultTrees(leaves, request.miners)
    commitment = dataclasses.replace(
        request.commitment,
        results_root=trees.root,
        input_tokens=trees.usage.input_tokens,
        output_tokens=trees.usage.output_tokens,
        served_roots=trees.served_roots() if roots is None else roots,
    )
    return dataclasses.replace(request, commitment=commitment, leaves=tuple(leaves))


def test_no_miner_signs_a_tree_with_a_billed_line_no_signer_answers_for(
    reader: Reader, two_stage_run: Any
) -> None:
    """A signer answers the owner's challenge of any line of the tree: it checks every leaf, not only its own
    (a coordinator with one colluding miner could otherwise bill a line nobody can be held to)."""
    served, _ = two_stage_run
    spare = Account.create().address
    honest = SigningRequest.from_json(signing_request(reader, served, spare=spare))
    assert check_tree(honest).root == honest.commitment.results_root
    leaves = list(honest.leaves)

    billed = leaves.copy()  # a line of many tokens credited to the spare alone, which is left out
    billed[3] = dataclasses.replace(billed[3], output_tokens=2_000_000, pipeline=(spare,))
    roots = (*ResultTrees(billed, honest.miners).served_roots()[:2], bytes(32))
    with pytest.raises(RefusedToSign, match=f"task {TASK} line 3: it bills tokens no signing miner answers"):
        check_tree(_retreed(honest, billed, roots))
    short = served_tree({leaf.request_index: leaf.hash() for leaf in leaves[1:]})  # one of the head's lines
    assert short is not None
    shrunk = short.root
    with pytest.raises(RefusedToSign, match=f"miner {HEAD.address}'s served root is not the root of its"):
        check_tree(_retreed(honest, leaves, (shrunk, *honest.commitment.served_roots[1:])))
    count = len(leaves)
    for other in (
        dataclasses.replace(honest, miners=honest.miners[::-1]),
        dataclasses.replace(honest, request_count=count - 1),
    ):  # what the coordinator shows must be what the signature names (and the contract reads from the task)
        with pytest.raises(
            RefusedToSign, match="the commitment is for other miners or another request count"
        ):
            check_tree(other)
    with pytest.raises(RefusedToSign, match=f"task {TASK}: {count - 1} leaves for {count} requests"):
        check_tree(dataclasses.replace(honest, leaves=tuple(leaves[:-1])))
    with pytest.raises(RefusedToSign, match="one leaf per request, in request order"):
        check_tree(dataclasses.replace(honest, leaves=(leaves[1], leaves[0], *leaves[2:])))
    altered = [*leaves[:-1], dataclasses.replace(leaves[-1], output_tokens=leaves[-1].output_tokens + 1)]
    with pytest.raises(RefusedToSign, match="the leaves do not make the committed results root"):
        check_tree(dataclasses.replace(honest, leaves=tuple(altered)))


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
        "its leaf is not at its position in the committed root": {5: {"proof": []}},
        "its leaf does not name us": {5: {"pipeline": [HEAD.address]}},
    }
    for reason, tamper in cases.items():
        with pytest.raises(RefusedToSign, match=f"task {TASK} line 5: {reason}"):
            check_and_sign(
                SECOND,
                SECOND.address,
                signing_request(reader, served, tamper),
                journal.served,
                reader,
                CHAIN_ID,
                REGISTRY,
            )
    with pytest.raises(Unrecorded, match=f"task {TASK}: we have no record of serving") as unrecorded:
        check_and_sign(SECOND, SECOND.address, honest, {}, reader, CHAIN_ID, REGISTRY)
    assert unrecorded.value.lines == [int(item["index"]) for item in honest["lines"]]
    with pytest.raises(RefusedToSign, match="line 0: its leaf does not name us"):
        check_and_sign(*own_signer(), honest, journal.served, reader, CHAIN_ID, REGISTRY)


def test_no_miner_signs_a_usage_the_results_do_not_add_up_to(reader: Reader, two_stage_run: Any) -> None:
    """Its own lines' proofs and the usage witness each yield the tree's totals: a commitment that charges one
    output token more, or a witness that is not in the root, is refused, also by a miner that served nothing
    (every signer loses its stake lock if anyone refutes the usage)."""
    served, journal = two_stage_run
    honest = signing_request(reader, served)
    overstated = json.loads(json.dumps(honest))
    overstated["commitment"]["output_tokens"] += 1
    total = ResultCommitment.from_json(TASK, honest["commitment"])
    message = (
        f"task {TASK}: the results add up to {total.input_tokens} input and {total.output_tokens} output "
        f"tokens, not the {total.input_tokens} and {total.output_tokens + 1} committed"
    )
    for signer, journal_served, request in (
        (SECOND, journal.served, overstated),
        (Account.create(), {}, overstated | {"lines": []}),
    ):
        with pytest.raises(RefusedToSign, match=re.escape(message)):
            check_and_sign(signer, signer.address, request, journal_served, reader, CHAIN_ID, REGISTRY)
    bent = json.loads(json.dumps(honest))
    bent["usage_witness"]["output_tokens"] += 1
    with pytest.raises(RefusedToSign, match="line 0: its leaf is not at its position"):
        check_and_sign(*own_signer(), bent | {"lines": []}, {}, reader, CHAIN_ID, REGISTRY)


def test_a_miner_that_served_nothing_signs_the_zero_root(reader: Reader, two_stage_run: Any) -> None:
    """A spare assigned to the task vouches for no line: no dispute can ever hold it to account."""
    served, _ = two_stage_run
    spare = Account.create()
    request = signing_request(reader, served, spare=spare.address) | {"lines": []}
    signed = check_and_sign(spare, spare.address, request, {}, reader, CHAIN_ID, REGISTRY)
    commitment = ResultCommitment.from_json(TASK, request["commitment"])
    assert recover_signer(signed.signature, commitment, spare.address, CHAIN_ID, REGISTRY) == spare.address


def test_no_miner_signs_a_split_that_shorts_it(reader: Reader, two_stage_run: Any) -> None:
    """The miners' part must be split by the work weights, which add up to the task's tokens times the
    model's 4 layers, and the second stage's weight must be what its journal records (tokens times its 2
    layers): a weight moved from it to the head, a total that does not add up, or amounts not split by the
    weights are each refused."""
    served, journal = two_stage_run
    honest = signing_request(reader, served)
    work = honest["weights"][1]
    tokens = work // 2

    def with_weights(weights: list[int], amounts: list[int] | None = None) -> dict[str, Any]:
        request = json.loads(json.dumps(honest))
        request["weights"] = weights
        request["commitment"]["miner_amounts"] = amounts or split(1000, weights)
        return request

    cases = {
        f"we are credited {work - 7} units of work, but did {work}": with_weights([work + 7, work - 7]),
        f"the work weights add up to {2 * work + 1}, not its {tokens} tokens times 4 layers": with_weights(
            [work + 1, work]
        ),
        "the miners' amounts are not their part split by work": with_weights([work, work], [600, 400]),
    }
    for reason, request in cases.items():
        with pytest.raises(RefusedToSign, match=re.escape(f"task {TASK}: {reason}")):
            check_and_sign(SECOND, SECOND.address, request, journal.served, reader, CHAIN_ID, REGISTRY)
    check_and_sign(SECOND, SECOND.address, honest, journal.served, reader, CHAIN_ID, REGISTRY)


def test_a_new_assignment_rebuilds_the_stage_on_the_same_endpoint(checkpoint: Path, reader: Reader) -> None:
    lines = unit_lines(4, seeded=True)  # seeded: the same draws in the second task
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


def test_a_stage_measures_its_link_to_the_stage_it_sends_to(checkpoint: Path) -> None:
    with stage_hosts(checkpoint, [(0, 2), (2, 4)]) as [head, last]:
        assert head.assignment is not None and last.assignment is not None
        miners = ("0xhead", "0xlast")
        first = dataclasses.replace(head.assignment, miners=miners)
        second = dataclasses.replace(last.assignment, miners=miners)
        assert first.sends_to == ("0xlast", head.assignment.endpoints[1])
        assert second.sends_to == ("0xhead", head.assignment.endpoints[0])  # the ring back to the head
        second_inbox = head.assignment.endpoints[1]
        rtt = tcp_connect_ms(second_inbox)
        assert rtt is not None and rtt > 0
    assert tcp_connect_ms(second_inbox, timeout_s=0.5) is None  # nobody listens any more
    assert tcp_connect_ms("ipc:///tmp/stage") is None
    assert dataclasses.replace(first, endpoints=first.endpoints[:1], miners=miners[:1]).sends_to is None
    relay = RelayAddress("tcp://relay.example:5600", LinkKeys.generate().public)
    behind = dataclasses.replace(first, relays=(None, relay))  # the last stage is behind NAT
    assert behind.sends_to == ("0xlast", relay.endpoint)  # measured as far as the relay
    assert behind.links(None).next_relay == relay and behind.relay_of(0) is None


def test_more_microbatches_in_flight_split_the_same_kv_memory() -> None:
    """A 2-stage assignment keeping 8 microbatches in flight gives each a quarter of the pages one per stage
    would get; one without a count keeps one per stage, as before."""
    assignment = StageAssignment(1, 1, 0, 0, 2, ("tcp://a:1", "tcp://b:2"), microbatches=8)
    cache = in_flight_cache(CACHE, assignment)
    assert (cache.num_microbatches, cache.local_pages) == (8, CACHE.local_pages // 4)
    default = in_flight_cache(CACHE, dataclasses.replace(assignment, microbatches=0))
    assert (default.num_microbatches, default.local_pages) == (2, CACHE.local_pages)


def test_a_node_listens_on_its_address_while_it_joins() -> None:
    """The stage inbox binds only once assigned, so the node holds its address while the coordinator probes
    it; a `*` port or a taken one is left alone."""
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    assert tcp_connect_ms(endpoint, timeout_s=0.5) is None
    with listening(endpoint):
        assert tcp_connect_ms(endpoint, timeout_s=0.5) is not None
        with listening(endpoint):  # taken: logged, nothing raised
            pass
    assert tcp_connect_ms(endpoint, timeout_s=0.5) is None
    with listening("tcp://127.0.0.1:*"):
        pass
