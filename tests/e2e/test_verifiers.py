"""Arbitration end to end with real verifiers: two `arbitration verify` processes (staked on-chain, re-scoring
with the reference model) watch a market whose only miner corrupts half of its lines (one substituted token,
greedy requests). The tests run in file order, each on its own batch, since every outcome moves balances:

- an honest line disputed anyway: the verifiers vote "correct", the bond pays them and the miner, the task
  settles normally;
- a corrupted line disputed: they vote "at fault", the miner is slashed, the owner refunded, the verifiers
  rewarded;
- random audits on (every task selected): a verifier catches a corrupted line nobody disputed, opens the audit
  with the pool's bond, and the same outcome follows, with the bond back in the pool.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from typer.testing import CliRunner

from client_sdk.arbitration_cli import app
from client_sdk.chain.types import Dispute, DisputeStatus, TaskStatus
from demo.system import UNIT, LocalSystem, SystemConfig
from miner.verify.corrupt import CorruptionSwitch
from tests.coordinator.helpers import chat_line, jsonl
from tests.e2e.conftest import wait_for

FAULT = CorruptionSwitch("substitute", 0.5)
MAX_PRICE = UNIT
CONFIG = SystemConfig(miners=1, verifiers=2, faulty_miner="substitute:0.5", audit_rate_bps=0)


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


def voted(system: LocalSystem, dispute_id: int) -> Dispute:
    """The dispute once both verifiers have voted."""
    get = system.market.arbitration.get_dispute
    return wait_for(
        lambda: (record := get(dispute_id)).votes_correct + record.votes_at_fault == 2 and record, timeout=120
    )


def resolve(system: LocalSystem, record: Dispute, dispute_id: int) -> DisputeStatus:
    system.advance_chain_time(record.voting_deadline - system.market.chain_time() + 1)
    return system.market.arbitration.resolve(dispute_id)


def balances(system: LocalSystem) -> dict[str, int]:
    escrow = system.market.escrow
    parties = {
        "user": system.user.address,
        "miner": system.miner_accounts[0].address,
        "coordinator": system.coordinator.address,
        **{f"verifier{i}": v.address for i, v in enumerate(system.verifier_accounts)},
    }
    return {name: escrow.balance_of(address) for name, address in parties.items()} | {
        "pool": escrow.audit_pool()
    }


def test_an_honest_line_disputed_is_voted_correct(system: LocalSystem) -> None:
    served = serve(system, "honest")
    assert served.honest and served.corrupted
    before = balances(system)
    dispute_id = dispute(system, served, served.honest[0])
    record = voted(system, dispute_id)
    assert (record.votes_correct, record.votes_at_fault) == (2, 0)
    assert resolve(system, record, dispute_id) == DisputeStatus.MINERS_CORRECT
    task = system.market.tasks.get_task(served.task_id)
    assert task.status == TaskStatus.FINALIZED
    bond, reward_bps = record.bond, system.market.arbitration.contract.functions.verifierRewardBps().call()
    share = bond * reward_bps // 10_000 // 2
    [paid] = system.market.tasks.miner_amounts_of(served.task_id)
    fee = task.payment * system.config.fee_bps // 10_000
    after = balances(system)
    assert after["verifier0"] - before["verifier0"] == after["verifier1"] - before["verifier1"] == share
    assert after["miner"] - before["miner"] == paid + bond - 2 * share
    assert after["user"] - before["user"] == MAX_PRICE - task.payment  # the bond is gone, the rest refunded
    assert after["coordinator"] - before["coordinator"] == fee


def test_a_corrupted_line_disputed_slashes_the_miner(system: LocalSystem) -> None:
    served = serve(system, "cheat")
    miner = system.miner_accounts[0].address
    stake_before = system.market.registry.stake_of(miner)
    before = balances(system)
    dispute_id = dispute(system, served, served.corrupted[0])
    record = voted(system, dispute_id)
    assert (record.votes_correct, record.votes_at_fault) == (0, 2)
    assert resolve(system, record, dispute_id) == DisputeStatus.MINERS_AT_FAULT
    slashed = system.market.tasks.min_stake_lock()
    reward_bps = system.market.arbitration.contract.functions.verifierRewardBps().call()
    share = slashed * reward_bps // 10_000 // 2
    after = balances(system)
    assert after["verifier0"] - before["verifier0"] == after["verifier1"] - before["verifier1"] == share
    # the whole escrow back, the bond back, and the slashed stake less the verifiers' reward
    assert after["user"] - before["user"] == MAX_PRICE + record.bond + slashed - 2 * share
    assert after["miner"] == before["miner"] and after["coordinator"] == before["coordinator"]
    stake_after = system.market.registry.stake_of(miner)  # the task's lock is gone: slashed
    assert (stake_after.free, stake_after.locked) == (stake_before.free, stake_before.locked - slashed)


def test_an_audit_catches_a_corrupted_line_nobody_disputed(system: LocalSystem) -> None:
    system.market.arbitration.set_audit_rate(10_000)  # every task is audited from now on
    ids = [c for c in (f"audit-{i}" for i in range(40)) if FAULT.chooses(c)][:4]  # all corrupted
    lines = [chat_line(c, f"say something about {c}", max_tokens=8, temperature=0) for c in ids]
    client = system.client()
    before = balances(system)  # a verifier may open the audit as soon as the batch is committed
    file = client.files.create(file=jsonl(lines), purpose="batch")
    batch = client.batches.create(input_file_id=file.id, endpoint="/v1/chat/completions", max_price=MAX_PRICE)
    done = client.batches.wait(batch.id, poll_s=0.5, timeout_s=240)
    assert done.status == "completed"
    arbitration = system.market.arbitration
    dispute_id = wait_for(lambda: arbitration.dispute_of_task(done.task_id), timeout=120)
    record = voted(system, dispute_id)
    assert record.audit and record.challenger == system.user.address
    assert (record.votes_correct, record.votes_at_fault) == (0, 2)
    assert before["pool"] - arbitration.contract.functions.disputeBond().call() == balances(system)["pool"]
    assert resolve(system, record, dispute_id) == DisputeStatus.MINERS_AT_FAULT
    slashed = system.market.tasks.min_stake_lock()
    share = slashed * arbitration.contract.functions.verifierRewardBps().call() // 10_000 // 2
    after = balances(system)
    assert after["pool"] == before["pool"]  # the audit's bond went back to the pool
    assert after["user"] - before["user"] == MAX_PRICE + slashed - 2 * share
    assert after["verifier0"] - before["verifier0"] == after["verifier1"] - before["verifier1"] == share
    evidence = client.http.get(f"/v1/disputes/{dispute_id}/evidence").json()
    assert evidence["reason"].startswith("audit: ") and evidence["result_line"]["custom_id"] in ids
