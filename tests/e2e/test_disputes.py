"""`arbitration dispute open | show | list | resolve` over a running market: the task owner disputes an
honest line (the bond moves, the evidence is served and hashes to the disputed leaf), every refusal is one
clear line, the coordinator refuses tampered evidence, and with no verifier to draw a jury from the dispute
resolves to the documented NoDecision, which costs the owner the no-decision fee.

The tests run in file order on one system and two completed batches: A is disputed, B's window runs out."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa
from click.testing import Result
from eth_account.signers.local import LocalAccount
from typer.testing import CliRunner

from client_sdk.chain.anvil import dev_accounts
from client_sdk.chain.types import DisputeStatus
from client_sdk.cli.arbitration import app
from client_sdk.client import Batch
from client_sdk.protocol.task import TaskStatus
from client_sdk.verify import answers, is_input_line, result_leaf
from coordinator.db.models import FileContent
from demo.system import UNIT, LocalSystem
from tests.coordinator.helpers import chat_line, jsonl
from tests.e2e.conftest import wait_for

STRANGER = dev_accounts()[6]  # neither the owner nor a miner: another user, or a verifier


@dataclass(frozen=True)
class Batches:
    disputed: Batch  # A
    expiring: Batch  # B: its challenge window runs out unchallenged


@pytest.fixture(scope="module")
def batches(system: LocalSystem) -> Batches:
    client = system.client()
    created = []
    for name in ("a", "b"):
        lines = [chat_line(f"{name}-{i}", f"what is {i} plus {i}?", max_tokens=4) for i in range(3)]
        file = client.files.create(file=jsonl(lines), purpose="batch")
        created.append(
            client.batches.create(input_file_id=file.id, endpoint="/v1/chat/completions", max_price=UNIT)
        )
    done = [client.batches.wait(b.id, poll_s=0.5, timeout_s=240) for b in created]
    assert [b.status for b in done] == ["completed"] * 2, (system.workdir / "worker.log").read_text()[-3000:]
    return Batches(*done)


def arbitration(system: LocalSystem, *args: str, account: LocalAccount | None = None) -> Result:
    env = system.environment(account or system.user) | {"BATCHMARKET_COORDINATOR_URL": system.api_url}
    return CliRunner().invoke(app, ["dispute", *args], env=env)


def refusal(result: Result) -> str:
    assert result.exit_code == 1, result.output
    assert result.stderr.count("\n") == 1, result.stderr
    return result.stderr.strip()


def test_refusals_before_any_dispute(system: LocalSystem, batches: Batches) -> None:
    a = batches.disputed
    stranger = refusal(arbitration(system, "open", "--batch", a.id, "--custom-id", "a-1", account=STRANGER))
    assert (
        stranger
        == f"error: batch {a.id} is not a batch of {STRANGER.address}: only its owner can dispute its lines"
    )
    unknown = refusal(arbitration(system, "open", "--batch", a.id, "--custom-id", "nope"))
    assert unknown == f"error: batch {a.id} has no result line with custom_id 'nope'"

    user = system.market_as(system.user)
    bond = user.arbitration.config_of(a.task_id).dispute_bond
    held = user.token.balance_of(system.user.address)
    user.token.transfer(system.admin.address, held - bond + 1)  # one base unit short of the bond
    try:
        poor = refusal(arbitration(system, "open", "--batch", a.id, "--custom-id", "a-1"))
    finally:
        system.market.token.transfer(system.user.address, held - bond + 1)
    assert poor == f"error: the dispute bond is 5.000000 mUSD but {system.user.address} holds 4.999999 mUSD"


def test_a_line_the_coordinator_altered_is_not_in_the_committed_root(
    system: LocalSystem, batches: Batches
) -> None:
    """A dishonest coordinator serving a changed line: the CLI finds it outside the root and opens nothing."""
    engine = sa.create_engine(system.database_url)
    file_id = batches.disputed.output_file_id
    row = FileContent.__table__.c
    with engine.begin() as connection:
        original = connection.execute(sa.select(row.data).where(row.file_id == file_id)).scalar_one()
        connection.execute(
            sa.update(FileContent)
            .where(row.file_id == file_id)
            .values(data=original.replace(b'"content":"', b'"content":"!', 1))
        )
    try:
        tampered = refusal(arbitration(system, "open", "--batch", batches.disputed.id, "--custom-id", "a-1"))
    finally:
        with engine.begin() as connection:
            connection.execute(sa.update(FileContent).where(row.file_id == file_id).values(data=original))
        engine.dispose()
    assert tampered.startswith("error: result line 1 (custom_id ")
    assert tampered.endswith("not part of the results committed on-chain (tampered?)")
    assert system.market.arbitration.dispute_count() == 0


def test_opening_a_dispute_posts_the_bond_and_publishes_checkable_evidence(
    system: LocalSystem, batches: Batches
) -> None:
    market, a = system.market, batches.disputed
    bond = market.arbitration.config_of(a.task_id).dispute_bond
    wallet, escrowed = (
        market.token.balance_of(system.user.address),
        market.token.balance_of(market.escrow.address),
    )
    opened = arbitration(
        system, "open", "--batch", a.id, "--custom-id", "a-1", "--reason", "1 plus 1 is 2", "--json"
    )
    assert opened.exit_code == 0, opened.output
    assert opened.stderr.startswith("warning: no verifier judges "), opened.stderr  # none in this market
    report = json.loads(opened.stdout)
    assert (report["task"], report["request_index"], report["status"]) == (a.task_id, 1, "open")
    assert market.token.balance_of(system.user.address) == wallet - bond
    assert market.token.balance_of(market.escrow.address) == escrowed + bond
    assert market.tasks.get_task(a.task_id).status == TaskStatus.DISPUTED

    served = system.client(STRANGER).request("GET", f"/v1/disputes/{report['dispute']}/evidence").json()
    record = market.arbitration.get_dispute(report["dispute"])
    leaf = result_leaf(record.task_id, served["result_line"])
    assert leaf.hash() == record.leaf_hash and served["reason"] == "1 plus 1 is 2"
    assert answers(leaf, served["request_line"])
    input_root = market.tasks.get_task(record.task_id).input_root
    input_proof = [bytes.fromhex(p[2:]) for p in served["input_proof"]]
    assert is_input_line(input_root, leaf.request_index, served["request_line"], input_proof)
    (line,) = [v for v in system.client().batches.results(a.id).output if v.line["custom_id"] == "a-1"]
    assert leaf == line.leaf and served["result_line"] == line.line

    shown = json.loads(arbitration(system, "show", str(report["dispute"]), "--json").stdout)
    assert shown == {k: v for k, v in report.items() if k != "custom_id"}
    mine = json.loads(arbitration(system, "list", "--mine", "--json").stdout)
    assert [d["dispute"] for d in mine] == [report["dispute"]]
    assert json.loads(arbitration(system, "list", "--mine", "--json", account=STRANGER).stdout) == []


def test_a_second_dispute_on_the_task_is_refused(system: LocalSystem, batches: Batches) -> None:
    a = batches.disputed
    again = refusal(arbitration(system, "open", "--batch", a.id, "--custom-id", "a-2"))
    assert (
        again == f"error: task {a.task_id} already has your dispute 1 (one per task): see "
        "`arbitration dispute show 1`"
    )


def test_the_coordinator_refuses_tampered_or_foreign_evidence(system: LocalSystem) -> None:
    path = "/v1/disputes/1/evidence"
    served = system.client(STRANGER).request("GET", path).json()
    body = {
        "request_line": served["request_line"],
        "input_proof": served["input_proof"],
        "result_line": served["result_line"],
        "reason": served["reason"],
    }
    user = system.client().http
    assert user.post(path, json=body).status_code == 200  # the same again: a no-op
    tampered = dict(body, result_line=dict(body["result_line"], custom_id="a-0"))
    refused = user.post(path, json=tampered)
    assert refused.status_code == 400
    assert refused.json()["error"] == {
        "message": "the result line does not hash to dispute 1's leaf on-chain",
        "type": "invalid_request_error",
        "param": "result_line",
        "code": "invalid_request",
    }
    changed = user.post(path, json=dict(body, reason="another reason"))  # the same lines: a no-op
    assert (changed.status_code, changed.json()["reason"]) == (200, served["reason"])
    foreign = system.client(STRANGER).http.post(path, json=body)  # anyone may publish the (checked) lines
    assert foreign.status_code == 200
    assert system.client(STRANGER).http.get("/v1/disputes/2/evidence").status_code == 404


def test_resolving_waits_for_the_round_to_end(system: LocalSystem) -> None:
    deadline = system.market.arbitration.round_of(1, 0).draw_deadline
    early = refusal(arbitration(system, "resolve", "1"))
    until = datetime.fromtimestamp(deadline, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    waiting = f"error: dispute 1 round 0: waiting for its jury to be drawn until {until} (chain "
    assert early.startswith(waiting)
    assert early.endswith("): resolve it after that")


def test_after_the_window_a_line_cannot_be_disputed(system: LocalSystem, batches: Batches) -> None:
    system.advance_chain_time(system.config.challenge_window + 1)
    b = batches.expiring
    # the worker settles B once its window has passed; wait, so that B's refund lands before the next test
    wait_for(lambda: system.market.tasks.get_task(b.task_id).status == TaskStatus.FINALIZED)
    late = refusal(arbitration(system, "open", "--batch", b.id, "--custom-id", "b-0"))
    assert late.startswith(f"error: the challenge window of task {b.task_id} closed at ")


def test_with_no_jury_the_dispute_resolves_to_no_decision(system: LocalSystem, batches: Batches) -> None:
    """No verifier is registered here, so no jury is drawn: after the drawing phase the dispute ends
    undecided; the results stand and the owner pays the no-decision fee to the disputed line's miners."""
    market, a = system.market, batches.disputed
    record = market.arbitration.get_dispute(1)
    pipeline = market.arbitration.pipeline_of(1)
    system.advance_chain_time(market.arbitration.round_of(1, 0).draw_deadline - market.chain_time() + 1)
    owed = market.escrow.balance_of(system.user.address)
    earned = [market.escrow.balance_of(m) for m in pipeline]
    resolved = arbitration(system, "resolve", "1")
    assert resolved.exit_code == 0, resolved.output
    assert resolved.stdout.strip() == (
        "dispute 1: no_decision: no majority (a tie, no reveal, or no jury drawn in time): the results stand "
        "and the owner's bond comes back less the no-decision fee"
    )
    assert market.arbitration.get_dispute(1).status == DisputeStatus.NO_DECISION
    task = market.tasks.get_task(a.task_id)
    assert task.status == TaskStatus.FINALIZED
    fee = record.bond * record.terms.no_decision_fee_bps // 10_000
    refund = task.max_price - task.payment
    assert market.escrow.balance_of(system.user.address) == owed + record.bond - fee + refund
    shares = [market.escrow.balance_of(m) - before for m, before in zip(pipeline, earned, strict=True)]
    committed = market.tasks.miner_amounts_of(a.task_id)
    miners = market.tasks.miners_of(a.task_id)
    paid = {m: amount for m, amount in zip(miners, committed, strict=True)}
    fee_shares = [share - paid.get(m, 0) for m, share in zip(pipeline, shares, strict=True)]
    assert sum(fee_shares) == fee, "the fee goes to the line's pipeline, in equal parts"
    again = refusal(arbitration(system, "resolve", "1"))
    assert again == "error: dispute 1 is already resolved: no_decision"
    for listing in (arbitration(system, "show", "1"), arbitration(system, "list")):  # the tables people read
        assert listing.exit_code == 0 and "no_decision" in listing.stdout, listing.output
