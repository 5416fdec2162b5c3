"""The evidence service (no HTTP) against a real dispute on anvil: it stores the request and result lines of
an open dispute, sent by anyone, once, and only if they hash back to the leaf the dispute holds
on-chain."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from eth_account.signers.local import LocalAccount

from client_sdk.chain.anvil import Anvil
from client_sdk.chain.contracts import Market
from client_sdk.eip712 import sign_commitment
from client_sdk.inputs import custom_id_hash, input_tree, line_hash
from client_sdk.results import PROOF_KEY, LineProof, ResultLeaf, ResultTrees, output_hash
from client_sdk.verify import answers, result_leaf
from coordinator.db.migrate import upgrade
from coordinator.db.models import DisputeEvidence
from coordinator.db.session import Database
from coordinator.services import disputes
from coordinator.services.errors import Conflict, InvalidInput, NotFound
from demo.lifecycle import DemoConfig, price_results
from tests.conftest import VOTING_PERIOD
from tests.coordinator.helpers import chat_line
from tests.helpers import assigned_task

TOKENS = (12, 5)  # input and output tokens of every line


@dataclass(frozen=True)
class Disputed:
    market: Market
    dispute_id: int
    evidence: disputes.Evidence
    other: disputes.Evidence  # the other line of the same task, with its own valid proof


def result_line(task_id: int, index: int, request: dict[str, Any], answer: str) -> dict[str, Any]:
    body = {"object": "chat.completion", "choices": [{"index": 0, "message": {"content": answer}}]}
    return {
        "id": f"batch_req_{task_id}_{index}",
        "custom_id": request["custom_id"],
        "response": {"status_code": 200, "request_id": f"batch_req_{task_id}_{index}", "body": body},
        "error": None,
    }


def dispute_line_1(
    admin_market: Market, accounts: list[LocalAccount], answered: dict[int, dict[str, Any]] | None = None
) -> Disputed:
    """A committed task of three lines, signed by its two miners; the user disputes line 1. Line i's leaf
    answers `answered[i]` instead of the user's request where given (a coordinator swapping a prompt)."""
    coordinator, user, miners = accounts[1], accounts[2], accounts[3:5]
    requests = [chat_line(f"q-{i}", f"what is {i} plus {i}?") for i in range(3)]
    task_id = assigned_task(admin_market, coordinator, user, miners, requests)
    served = [(answered or {}).get(i, r) for i, r in enumerate(requests)]
    lines = [result_line(task_id, i, r, str(2 * i)) for i, r in enumerate(served)]
    pipeline = tuple(m.address for m in miners)
    leaves = [
        ResultLeaf(
            task_id, i, custom_id_hash(r["custom_id"]), line_hash(r), output_hash(line), *TOKENS, pipeline
        )
        for i, (r, line) in enumerate(zip(served, lines, strict=True))
    ]
    trees = ResultTrees(leaves, list(pipeline))
    for i, line in enumerate(lines):
        line[PROOF_KEY] = LineProof.of(trees, i).to_json()
    commitment = price_results(admin_market, task_id, leaves, list(pipeline), DemoConfig(requests=3))
    chain_id, registry = admin_market.w3.eth.chain_id, admin_market.deployment.task_registry
    signatures = [sign_commitment(m, commitment, m.address, chain_id, registry) for m in miners]
    admin_market.as_account(coordinator).tasks.commit_results(commitment, signatures)
    owner = admin_market.as_account(user)
    bond = owner.arbitration.config_of(task_id).dispute_bond
    admin_market.token.mint(user.address, bond)
    owner.token.approve(owner.escrow.address, bond)
    dispute_id = owner.arbitration.open_dispute(leaves[1], trees.proof(1), trees.served_proofs(1))
    inputs = input_tree(requests)
    return Disputed(
        admin_market,
        dispute_id,
        disputes.Evidence(requests[1], lines[1], "two plus two is not 2", tuple(inputs.proof(1))),
        disputes.Evidence(requests[0], lines[0], None, tuple(inputs.proof(0))),
    )


@pytest.fixture
def disputed(admin_market: Market, accounts: list[LocalAccount]) -> Disputed:
    return dispute_line_1(admin_market, accounts)


@pytest.fixture
def database(tmp_path: Path) -> Database:
    url = f"sqlite:///{tmp_path / 'c.db'}"
    upgrade(url)
    return Database(url)


def publish(database: Database, d: Disputed, evidence: disputes.Evidence) -> dict[str, Any]:
    with database.session() as session:
        market = d.market
        stored = disputes.publish(session, market.arbitration, market.tasks, d.dispute_id, evidence, now=1)
        return disputes.evidence_object(stored)


def test_the_evidence_is_stored_once(database: Database, disputed: Disputed) -> None:
    stored = publish(database, disputed, disputed.evidence)
    record = disputed.market.arbitration.get_dispute(disputed.dispute_id)
    assert stored["leaf_hash"] == "0x" + record.leaf_hash.hex() and stored["task_id"] == record.task_id
    assert (stored["request_line"], stored["result_line"]) == (
        disputed.evidence.request_line,
        disputed.evidence.result_line,
    )
    assert stored["input_proof"] == ["0x" + p.hex() for p in disputed.evidence.input_proof]
    assert publish(database, disputed, disputed.evidence) == stored  # the same again: a no-op
    # the same lines with another reason: a no-op too (the reason is the first publisher's)
    assert publish(database, disputed, replace(disputed.evidence, reason="another reason")) == stored
    with database.session() as session:
        assert disputes.evidence_object(disputes.get_evidence(session, disputed.dispute_id)) == stored
        assert session.query(DisputeEvidence).count() == 1


def test_lines_that_are_not_the_disputed_leaf_are_refused(database: Database, disputed: Disputed) -> None:
    good = disputed.evidence
    swapped_request = replace(good, request_line=disputed.other.request_line)
    with pytest.raises(InvalidInput, match="request line is not line 1 of the task's input") as refused:
        publish(database, disputed, swapped_request)
    assert refused.value.param == "input_proof"
    with pytest.raises(InvalidInput, match="its input proof fails"):
        publish(database, disputed, replace(good, input_proof=disputed.other.input_proof))
    edited = dict(good.result_line, response={"status_code": 200, "body": {"choices": []}})
    with pytest.raises(InvalidInput, match="result line does not hash to dispute"):
        publish(database, disputed, replace(good, result_line=edited))
    with pytest.raises(InvalidInput, match="is about line 1, not line 0"):
        publish(database, disputed, disputed.other)
    bare = {k: v for k, v in good.result_line.items() if k != PROOF_KEY}
    with pytest.raises(InvalidInput, match=f"{PROOF_KEY} fields are missing or malformed"):
        publish(database, disputed, replace(good, result_line=bare))
    with database.session() as session:
        assert session.query(DisputeEvidence).count() == 0


def test_anyone_publishes_an_open_dispute_s_evidence_and_only_while_it_is_open(
    database: Database, disputed: Disputed, chain: Anvil
) -> None:
    """Whoever opened a dispute cannot keep its jurors blind by keeping quiet: the lines are checked against
    the chain, so anyone who has them may publish them (a verifier following an audit, the miners)."""
    stored = publish(database, disputed, disputed.evidence)  # no caller at all: the check is the chain's
    assert stored["dispute_id"] == disputed.dispute_id
    with pytest.raises(NotFound):
        publish(database, replace(disputed, dispute_id=disputed.dispute_id + 1), disputed.evidence)
    chain.advance_time(VOTING_PERIOD)
    disputed.market.arbitration.resolve(disputed.dispute_id)
    with pytest.raises(Conflict, match="is no_decision: evidence is taken only while it is open"):
        publish(database, disputed, disputed.evidence)


def test_a_leaf_that_answers_another_request_is_evidence_of_the_fault(
    database: Database, admin_market: Market, accounts: list[LocalAccount]
) -> None:
    """The coordinator bound line 1 to an easier prompt and the miners answered that: the owner's own line 1,
    proven in the task's input root, is accepted as evidence although the leaf does not answer it, and that
    mismatch is what a verifier votes on."""
    easier = chat_line("q-1", "what is 1 plus 0?")
    swapped = dispute_line_1(admin_market, accounts, answered={1: easier})
    stored = publish(database, swapped, swapped.evidence)
    leaf = result_leaf(stored["task_id"], stored["result_line"])
    assert not answers(leaf, stored["request_line"])
    assert answers(leaf, easier)
