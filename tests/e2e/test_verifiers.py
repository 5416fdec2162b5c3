"""Arbitration end to end with real verifiers: three `arbitration verify` processes (staked on-chain,
re-scoring with the reference model) watch a market whose only miner corrupts half of its lines (one
substituted token, greedy requests), beside two verifiers of another model, who are never drawn onto its
juries (juries are drawn per model) and whose stake and balances never move. The verifiers draw each jury,
commit and reveal their votes and resolve; the test only moves the chain clock from phase to phase. The tests
run in file order, each on its own batch, since every outcome moves balances, and each checks every balance to
the unit from the jurors the chain drew:

- an honest line disputed anyway: the jury finds the miner correct; the bond pays the jurors and the miner,
the task settles normally; - a corrupted line disputed: the jury finds the miner at fault; it is slashed, the
owner refunded, the jurors rewarded; - random audits on (every task selected, switched on through the
timelock): a verifier catches a corrupted line nobody disputed and opens the audit with the pool's bond; a
jury without the auditor convicts, and the pool gets its bond back.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from dataclasses import replace as replaced

import pytest
from typer.testing import CliRunner

from client_sdk.chain.types import Dispute, DisputeStatus, Vote
from client_sdk.cli.arbitration import app
from client_sdk.protocol.model_identity import served_model_hash
from client_sdk.protocol.task import TaskStatus
from demo.system import UNIT, LocalSystem, SystemConfig
from miner.verify.corrupt import CorruptionSwitch
from tests.coordinator.helpers import chat_line, jsonl
from tests.e2e.conftest import wait_for
from tests.helpers import govern

FAULT = CorruptionSwitch("substitute", 0.5)
MAX_PRICE = UNIT
CONFIG = SystemConfig(
    miners=1,
    verifiers=3,
    other_model_verifiers=2,
    faulty_miner="substitute:0.5",
    audit_rate_bps=0,
    timelock_delay=60,
)


@pytest.fixture(scope="module")
def system(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalSystem]:
    with LocalSystem(tmp_path_factory.mktemp("verifiers"), CONFIG) as running:
        yield running


@dataclass(frozen=True)
class Served:
    batch_id: str
    task_id: int
    honest: list[str]
    corrupted: list[str]


def serve(system: LocalSystem, tag: str, count: int = 6) -> Served:
    """A completed greedy batch of `count` lines; which were corrupted is known from the switch."""
    ids = [f"{tag}-{i}" for i in range(count)]
    lines = [chat_line(c, f"say something about {c}", max_tokens=8, temperature=0) for c in ids]
    client = system.client()
    file = client.files.create(file=jsonl(lines), purpose="batch")
    batch = client.batches.create(input_file_id=file.id, endpoint="/v1/chat/completions", max_price=MAX_PRICE)
    done = client.batches.wait(batch.id, poll_s=0.5, timeout_s=240)
    assert done.status == "completed", (system.workdir / "worker.log").read_text()[-3000:]
    return Served(
        batch.id,
        done.task_id,
        [c for c in ids if not FAULT.chooses(c)],
        [c for c in ids if FAULT.chooses(c)],
    )


def dispute(system: LocalSystem, served: Served, custom_id: str) -> int:
    env = system.environment(system.user) | {"BATCHMARKET_COORDINATOR_URL": system.api_url}
    result = CliRunner().invoke(
        app, ["dispute", "open", "--batch", served.batch_id, "--custom-id", custom_id, "--json"], env=env
    )
    assert result.exit_code == 0, result.output
    return int(json.loads(result.output)["dispute"])


@dataclass(frozen=True)
class Decided:
    record: Dispute
    jurors: list[str]
    seats: int  # seats drawn
    held: dict[str, int]  # each juror's seats (a seat lands by weight, so a verifier may hold several)


def decided(system: LocalSystem, dispute_id: int, expected: Vote) -> Decided:
    """Round 0 of the dispute, moved from phase to phase by the clock while the verifiers act: they draw the
    jury, every juror commits and then reveals `expected`, and one of them resolves it."""
    arbitration, market = system.market.arbitration, system.market
    current = wait_for(lambda: (r := arbitration.round_of(dispute_id, 0)).drawn and r, timeout=120)
    jurors = arbitration.jurors_of(dispute_id, 0)
    assert jurors and current.seats_drawn == current.seats, "every seat filled"
    model = served_model_hash(system.model_dir)
    assert arbitration.get_dispute(dispute_id).model_id == model
    assert all(market.verifiers.judges(j, model) for j in jurors), "drawn from the model's pool"
    wait_for(lambda: all(any(arbitration.juror_of(dispute_id, 0, j).commitment) for j in jurors), timeout=120)
    system.advance_chain_time(current.commit_deadline - market.chain_time() + 1)
    revealed = lambda: all(arbitration.juror_of(dispute_id, 0, j).vote != Vote.NONE for j in jurors)  # noqa: E731
    wait_for(revealed, timeout=120)
    assert {arbitration.juror_of(dispute_id, 0, j).vote for j in jurors} == {expected}
    system.advance_chain_time(current.appeal_deadline - market.chain_time() + 1)
    record = wait_for(
        lambda: (d := arbitration.get_dispute(dispute_id)).status != DisputeStatus.OPEN and d, timeout=120
    )
    held = {j: arbitration.juror_of(dispute_id, 0, j).seats for j in jurors}
    return Decided(record, jurors, current.seats_drawn, held)


def assert_juror_gains(
    system: LocalSystem, result: Decided, before: dict[str, int], pot: int, auditor: str | None = None
) -> None:
    """Every juror got `pot` / seats for each seat it held and has no stake locked; verifiers not drawn got
    nothing; the verifiers of the other model were never drawn and keep exactly their stake. The `auditor`'s
    deposit stays locked until a verifier settles the audit: its lock is the caller's to check after that."""
    after = balances(system)
    for i, verifier in enumerate(system.verifier_accounts):
        held = result.held.get(verifier.address, 0)
        gain = after[f"verifier{i}"] - before[f"verifier{i}"]
        assert gain == pot // result.seats * held, (i, held, gain)
        if verifier.address != auditor:
            assert system.market.verifiers.verifier_of(verifier.address).locked == 0
    for i, other in enumerate(system.other_verifier_accounts):
        assert other.address not in result.jurors
        assert after[f"other{i}"] == before[f"other{i}"] == 0
        record = system.market.verifiers.verifier_of(other.address)
        assert (record.stake, record.locked) == (system.config.verifier_stake, 0)
        assert system.market.verifiers.models_of(other.address) == [served_model_hash(system.other_model_dir)]


def balances(system: LocalSystem) -> dict[str, int]:
    escrow = system.market.escrow
    parties = {
        "user": system.user.address,
        "miner": system.miner_accounts[0].address,
        "coordinator": system.coordinator.address,
        **{f"verifier{i}": v.address for i, v in enumerate(system.verifier_accounts)},
        **{f"other{i}": v.address for i, v in enumerate(system.other_verifier_accounts)},
    }
    return {name: escrow.balance_of(address) for name, address in parties.items()} | {
        "pool": escrow.audit_pool()
    }


def test_an_honest_line_disputed_is_found_correct(system: LocalSystem) -> None:
    served = serve(system, "honest")
    assert served.honest and served.corrupted
    before = balances(system)
    dispute_id = dispute(system, served, served.honest[0])
    result = decided(system, dispute_id, Vote.MINERS_CORRECT)
    assert result.record.status == DisputeStatus.MINERS_CORRECT
    task = system.market.tasks.get_task(served.task_id)
    assert task.status == TaskStatus.FINALIZED
    bond = result.record.bond
    reward = bond * result.record.terms.reward_bps // 10_000
    [paid] = system.market.tasks.miner_amounts_of(served.task_id)
    fee = task.payment * system.config.fee_bps // 10_000
    assert_juror_gains(system, result, before, reward)
    after = balances(system)
    assert after["miner"] - before["miner"] == paid + bond - reward
    assert after["user"] - before["user"] == MAX_PRICE - task.payment  # the bond is gone, the rest refunded
    assert after["coordinator"] - before["coordinator"] == fee
    assert after["pool"] - before["pool"] == reward % result.seats  # the rounding dust


def test_a_corrupted_line_disputed_slashes_the_miner(system: LocalSystem) -> None:
    served = serve(system, "cheat")
    miner = system.miner_accounts[0].address
    stake_before = system.market.registry.stake_of(miner)
    before = balances(system)
    dispute_id = dispute(system, served, served.corrupted[0])
    result = decided(system, dispute_id, Vote.MINERS_AT_FAULT)
    assert result.record.status == DisputeStatus.MINERS_AT_FAULT
    slashed = system.market.tasks.get_task(served.task_id).stake_lock
    reward = slashed * result.record.terms.reward_bps // 10_000
    assert_juror_gains(system, result, before, reward)
    after = balances(system)
    # the whole escrow back and the bond back; the slashed stake less the jurors' reward is pooled for audits
    assert after["user"] - before["user"] == MAX_PRICE + result.record.bond
    assert after["miner"] == before["miner"] and after["coordinator"] == before["coordinator"]
    assert after["pool"] - before["pool"] == slashed - reward + reward % result.seats
    stake_after = system.market.registry.stake_of(miner)  # the task's lock is gone: slashed
    assert (stake_after.free, stake_after.locked) == (stake_before.free, stake_before.locked - slashed)


def test_an_audit_catches_a_corrupted_line_nobody_disputed(system: LocalSystem) -> None:
    arbitration = system.market.arbitration
    every_task = replaced(arbitration.config(), audit_rate_bps=10_000)
    # the admin's change, through the timelock
    govern(system.market, system.anvil, arbitration.set_config_call(every_task))
    system.advance_chain_time(1)  # the new rate applies to tasks created from the next second on
    ids = [c for c in (f"audit-{i}" for i in range(40)) if FAULT.chooses(c)][:4]  # all corrupted
    lines = [chat_line(c, f"say something about {c}", max_tokens=8, temperature=0) for c in ids]
    client = system.client()
    before = balances(system)  # a verifier may open the audit as soon as the batch is committed
    file = client.files.create(file=jsonl(lines), purpose="batch")
    batch = client.batches.create(input_file_id=file.id, endpoint="/v1/chat/completions", max_price=MAX_PRICE)
    done = client.batches.wait(batch.id, poll_s=0.5, timeout_s=240)
    assert done.status == "completed"
    dispute_id = wait_for(lambda: system.market.audits.audit_of(done.task_id).dispute_id, timeout=120)
    opened = arbitration.get_dispute(dispute_id)
    assert opened.audit and opened.challenger == system.user.address
    assert before["pool"] - opened.bond == balances(system)["pool"]
    result = decided(system, dispute_id, Vote.MINERS_AT_FAULT)
    assert result.record.status == DisputeStatus.MINERS_AT_FAULT
    assert opened.opener not in result.jurors, "the auditor never judges its own audit"
    slashed = system.market.tasks.get_task(done.task_id).stake_lock
    reward = slashed * result.record.terms.reward_bps // 10_000
    assert_juror_gains(system, result, before, reward, auditor=opened.opener)
    after = balances(system)
    # the audit's bond went back to the pool, and the slash less the jurors' reward with it
    assert after["pool"] == before["pool"] + slashed - reward + reward % result.seats
    assert after["user"] - before["user"] == MAX_PRICE
    evidence = client.http.get(f"/v1/disputes/{dispute_id}/evidence").json()
    assert evidence["reason"].startswith("audit: ") and evidence["result_line"]["custom_id"] in ids
    # a verifier settles the resolved audit: a conviction frees the auditor's seat at no cost
    audit = wait_for(lambda: (a := system.market.audits.audit_of(done.task_id)).settled and a, timeout=120)
    assert audit.opener == opened.opener and audit.deposit == opened.terms.seat_stake
    opener = system.market.verifiers.verifier_of(opened.opener)
    assert opener.locked == 0 and balances(system)["pool"] == after["pool"]
