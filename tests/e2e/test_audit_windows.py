"""Audits escalate a cheaper copy of the model: a miner whose randomly audited lines score, over a window of
300 tokens, far above an honest miner's (as an int4 copy does: bench/results/verification_error_rates.txt) is
convicted on its next audited line even though that line passes alone.

The market is real (chain, coordinator, one honest miner on the tiny model); the four verifiers are the real
`arbitration verify` daemon (`miner.verify.daemon.Verifier`), run here in the test's process so that the test
can give each the memory of earlier audits: their windows already hold three audited lines of the miner that
strayed like an int4 copy's (0.12 per token). Running those audits for real would take a few minutes of
batches; what the windows hold is what the daemon would have recorded. Balances are checked to the unit.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import httpx
import pytest
from typer.testing import CliRunner

from client_sdk.chain.anvil import dev_accounts
from client_sdk.chain.types import DisputeStatus, Vote
from client_sdk.cli.arbitration import app
from client_sdk.errors import UserError
from client_sdk.http import coordinator_client
from client_sdk.protocol.task import TaskStatus
from demo.system import UNIT, LocalSystem, SystemConfig
from miner.verify.daemon import LineJudge, Verifier
from miner.verify.miner_scores import WINDOW_TOKENS, MinerScores
from miner.verify.policy import LineStats
from tests.coordinator.helpers import chat_line, jsonl
from tests.helpers import register_verifier

CONFIG = SystemConfig(miners=1, audit_rate_bps=10_000)  # every task audited, one line each
VERIFIERS = 4
MAX_PRICE = UNIT
POOL = 50 * UNIT
CHEAP_LINE = LineStats(tokens=WINDOW_TOKENS // 3, mismatches=40, gap_sum=12.0)  # 0.12 per token


@dataclass
class Market:
    system: LocalSystem
    verifiers: list[Verifier]
    clients: list[httpx.Client]

    def step(self, until: Callable[[], object], what: str, rounds: int = 60) -> None:
        """Steps every verifier (each pass mines a block, so seeds exist) until `until()` holds."""
        for _ in range(rounds):
            for verifier in self.verifiers:
                # a failed call is retried next pass, as the daemon's loop does
                with contextlib.suppress(UserError, httpx.HTTPError):
                    verifier.step()
            if until():
                return
            self.system.advance_chain_time(1)
        raise AssertionError(f"the verifiers did not get there: {what}")


@pytest.fixture(scope="module")
def market(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Market]:
    with LocalSystem(tmp_path_factory.mktemp("audit-windows"), CONFIG) as system:
        admin = system.market
        admin.token.mint(admin.transactor.account.address, POOL)  # type: ignore[union-attr]
        admin.token.approve(admin.escrow.address, POOL)
        admin.audits.fund_audit_pool(POOL)
        judge = LineJudge.load(system.model_dir)
        accounts = dev_accounts()[3 + CONFIG.miners : 3 + CONFIG.miners + VERIFIERS]
        clients = [coordinator_client(system.api_url, account, 60) for account in accounts]
        verifiers = [
            Verifier(register_verifier(admin, account, model=judge.model_hash), client, judge)
            for account, client in zip(accounts, clients, strict=True)
        ]
        try:
            yield Market(system, verifiers, clients)
        finally:
            for client in clients:
                client.close()


def committed_batch(system: LocalSystem, tag: str) -> tuple[str, int]:
    """A completed greedy batch of two honest lines (custom ids TAG-0, TAG-1): its id and its task's."""
    lines = [
        chat_line(f"{tag}-{i}", f"say something about {tag} {i}", max_tokens=12, temperature=0)
        for i in range(2)
    ]
    client = system.client()
    file = client.files.create(file=jsonl(lines), purpose="batch")
    batch = client.batches.create(input_file_id=file.id, endpoint="/v1/chat/completions", max_price=MAX_PRICE)
    done = client.batches.wait(batch.id, poll_s=0.5, timeout_s=240)
    assert done.status == "completed", (system.workdir / "worker.log").read_text()[-3000:]
    assert done.task_id is not None
    return batch.id, done.task_id


def round_voted(market: Market, dispute_id: int, r: int) -> list[str]:
    """Steps the verifiers through round `r` of the dispute up to the end of its reveal phase, moving the
    clock from phase to phase: they draw the jury, every juror commits, then reveals; returns the jurors."""
    system, arbitration = market.system, market.system.market.arbitration
    market.step(lambda: arbitration.round_of(dispute_id, r).drawn, f"round {r}'s jury drawn")
    jurors = arbitration.jurors_of(dispute_id, r)
    assert jurors
    committed = lambda: all(any(arbitration.juror_of(dispute_id, r, j).commitment) for j in jurors)  # noqa: E731
    market.step(committed, "every juror committed")
    current = arbitration.round_of(dispute_id, r)
    system.advance_chain_time(current.commit_deadline - system.market.chain_time() + 1)
    revealed = lambda: all(arbitration.juror_of(dispute_id, r, j).vote != Vote.NONE for j in jurors)  # noqa: E731
    market.step(revealed, "every juror revealed")
    system.advance_chain_time(current.reveal_deadline - system.market.chain_time() + 1)
    return jurors


def round_zero_decided(market: Market, dispute_id: int) -> list[str]:
    """Round 0 voted (`round_voted`), then past its appeal phase until one of the verifiers resolves it;
    returns the jurors."""
    system, arbitration = market.system, market.system.market.arbitration
    jurors = round_voted(market, dispute_id, 0)
    round0 = arbitration.round_of(dispute_id, 0)
    system.advance_chain_time(round0.appeal_deadline - system.market.chain_time() + 1)
    market.step(lambda: arbitration.get_dispute(dispute_id).status != DisputeStatus.OPEN, "resolved")
    return jurors


def owner_disputes(system: LocalSystem, batch_id: str, custom_id: str) -> int:
    """The user disputes the line `custom_id` of its batch from its shell (`arbitration dispute open`);
    returns the dispute id."""
    env = system.environment(system.user) | {"BATCHMARKET_COORDINATOR_URL": system.api_url}
    opened = CliRunner().invoke(
        app, ["dispute", "open", "--batch", batch_id, "--custom-id", custom_id, "--json"], env=env
    )
    assert opened.exit_code == 0, opened.output
    return int(json.loads(opened.output)["dispute"])


def balances(market: Market) -> dict[str, int]:
    system, escrow = market.system, market.system.market.escrow
    parties = {"user": system.user.address, "miner": system.miner_accounts[0].address}
    parties |= {v.address: v.address for v in market.verifiers}
    return {name: escrow.balance_of(address) for name, address in parties.items()} | {
        "pool": escrow.audit_pool()
    }


def test_an_honest_miner_s_audited_line_passes_and_nothing_is_opened(market: Market) -> None:
    audits = market.system.market.audits
    _, task_id = committed_batch(market.system, "clean")
    auditor = market.verifiers[0]
    market.step(lambda: task_id in auditor.watching.judged, "the audit of the clean task judged")
    audit = audits.audit_of(task_id)
    assert audit.selected and audit.dispute_id == 0
    miner = market.system.miner_accounts[0].address
    assert all(v.scores.score(miner) is None for v in market.verifiers)  # 12 tokens: no full window yet
    # settled now, so that its payments do not mix with the next test's balances
    tasks = market.system.market.tasks
    market.system.advance_chain_time(tasks.challenge_ends_at(task_id) - market.system.market.chain_time())
    with contextlib.suppress(UserError):  # the coordinator may have finalized it first
        tasks.finalize_task(task_id)
    assert tasks.get_task(task_id).status == TaskStatus.FINALIZED


def test_a_miner_whose_audited_window_strays_is_convicted_on_a_line_that_passes_alone(market: Market) -> None:
    system, arbitration = market.system, market.system.market.arbitration
    miner = system.miner_accounts[0].address
    for verifier in market.verifiers:  # the memory of three earlier audits of this miner
        for earlier in range(3):
            verifier.scores.add((10_000 + earlier, 0), [miner], CHEAP_LINE)
        assert verifier.scores.suspect(miner)
    registry = system.market.registry
    stake = lambda: (s := registry.stake_of(miner)).free + s.locked + s.unbonding  # noqa: E731
    staked = stake()
    before = balances(market)
    _, task_id = committed_batch(system, "window")
    stake_lock = system.market.tasks.get_task(task_id).stake_lock

    audits = system.market.audits
    market.step(lambda: audits.audit_of(task_id).dispute_id, "the audit opened")
    dispute_id = audits.audit_of(task_id).dispute_id
    opened = arbitration.get_dispute(dispute_id)
    assert opened.audit and opened.challenger == system.user.address
    evidence = system.client().http.get(f"/v1/disputes/{dispute_id}/evidence").json()
    assert evidence["reason"].startswith("audit: the line passes alone (ok")
    assert f"miner {miner}'s last {WINDOW_TOKENS} audited tokens score " in evidence["reason"]

    # The jurors vote by the same rule from their own windows.
    jurors = round_zero_decided(market, dispute_id)
    assert opened.opener not in jurors
    assert {arbitration.juror_of(dispute_id, 0, j).vote for j in jurors} == {Vote.MINERS_AT_FAULT}
    record = arbitration.get_dispute(dispute_id)
    assert record.status == DisputeStatus.MINERS_AT_FAULT
    seats = arbitration.round_of(dispute_id, 0).seats_drawn
    assert seats == 5  # each seat lands by weight, whatever is locked
    reward = stake_lock * record.terms.reward_bps // 10_000
    after = balances(market)
    assert after["user"] - before["user"] == MAX_PRICE  # refunded; the slash is no party's
    assert after["miner"] == before["miner"]  # paid nothing for the task
    assert staked - stake() == stake_lock
    for verifier in market.verifiers:
        gain = after[verifier.address] - before[verifier.address]
        held = arbitration.juror_of(dispute_id, 0, verifier.address).seats
        assert gain == reward // seats * held
    # the audit's bond back, the slash less the jurors' reward, and the dust
    assert after["pool"] == before["pool"] + stake_lock - reward + reward % seats


def test_an_owner_s_dispute_is_judged_on_its_line_alone_and_never_scored(market: Market) -> None:
    """An owner picks the lines it disputes: if they counted, a hostile owner could dispute an honest miner's
    worst lines until its window strayed. So an owner's dispute neither feeds the windows nor is judged by
    them: even against a miner the windows find suspect, a disputed line that passes alone is correct."""
    system, arbitration = market.system, market.system.market.arbitration
    miner = system.miner_accounts[0].address
    for verifier in market.verifiers:
        verifier.audits = False  # no audit dispute competes for the jurors' stake
        assert verifier.scores.suspect(miner)
    scores = [verifier.scores.score(miner) for verifier in market.verifiers]
    batch_id, _ = committed_batch(system, "owner")
    dispute_id = owner_disputes(system, batch_id, "owner-0")
    jurors = round_zero_decided(market, dispute_id)
    assert {arbitration.juror_of(dispute_id, 0, j).vote for j in jurors} == {Vote.MINERS_CORRECT}
    assert arbitration.get_dispute(dispute_id).status == DisputeStatus.MINERS_CORRECT
    assert [verifier.scores.score(miner) for verifier in market.verifiers] == scores


def test_the_opener_appeals_an_acquittal_of_a_line_it_still_finds_at_fault(market: Market) -> None:
    """The losing side of a round appeals while it can (the cost to corrupt a jury assumes it): for an audit
    that side is its opener. Only the auditor's window finds the miner suspect here; the jurors, with empty
    windows, judge the line alone and acquit it. The auditor appeals round 0 (twice its bond, from its
    wallet), and refuses round 1's appeal, whose bond is above its bound; the acquittal then stands."""
    system, arbitration = market.system, market.system.market.arbitration
    miner = system.miner_accounts[0].address
    auditor, jurors = market.verifiers[0], market.verifiers[1:]
    assert auditor.scores.suspect(miner)
    auditor.audits = True
    for juror in jurors:
        juror.audits = False
        juror.scores = MinerScores()  # no memory of the miner: each judges the line alone
    bond = system.market.arbitration.config().dispute_bond
    auditor.max_appeal_bond = 2 * bond  # round 0's appeal, not round 1's (4 x bond)
    system.market.token.mint(auditor.address, 2 * bond)
    _, task_id = committed_batch(system, "appeal")
    audits = system.market.audits
    market.step(lambda: audits.audit_of(task_id).dispute_id, "the audit opened")
    dispute_id = audits.audit_of(task_id).dispute_id
    assert arbitration.get_dispute(dispute_id).opener == auditor.address
    held = auditor.market.holds()

    jury = round_voted(market, dispute_id, 0)
    market.step(lambda: arbitration.get_dispute(dispute_id).round == 1, "the opener appealed")
    assert auditor.address not in jury
    assert {arbitration.juror_of(dispute_id, 0, j).vote for j in jury} == {Vote.MINERS_CORRECT}
    appeal = arbitration.round_of(dispute_id, 1)
    assert (appeal.bond, appeal.bond_payer) == (2 * bond, auditor.address)
    assert auditor.market.holds() == held - 2 * bond, "the appeal bond, exactly, from its wallet"

    jury = round_voted(market, dispute_id, 1)
    assert {arbitration.juror_of(dispute_id, 1, j).vote for j in jury} == {Vote.MINERS_CORRECT}
    for _ in range(3):  # in round 1's appeal phase
        auditor.step()
    assert arbitration.get_dispute(dispute_id).round == 1, "4 x bond is above its bound: no second appeal"
    assert auditor.market.holds() == held - 2 * bond
    system.advance_chain_time(
        arbitration.round_of(dispute_id, 1).appeal_deadline - system.market.chain_time() + 1
    )
    market.step(lambda: arbitration.get_dispute(dispute_id).status != DisputeStatus.OPEN, "resolved")
    assert arbitration.get_dispute(dispute_id).status == DisputeStatus.MINERS_CORRECT


def test_a_juror_penalized_below_its_weight_is_reweighed_once_the_dispute_ends(market: Market) -> None:
    """Weight whose stake penalties took is dead weight (every draw landing on it is lost; a pool full of
    it draws appeals short): the verifiers reweigh each penalized juror of a dispute once it ends. One juror
    of an owner's dispute stays silent (it is not stepped); the others vote, resolve, and reweigh it: its one
    seat of weight, backed now by half a seat or none, leaves the pool."""
    system, arbitration = market.system, market.system.market.arbitration
    verifiers = system.market.verifiers
    model = market.verifiers[0].judge.model_hash
    for verifier in market.verifiers:
        verifier.audits = False
    batch_id, _ = committed_batch(system, "silent")
    dispute_id = owner_disputes(system, batch_id, "silent-0")
    market.step(lambda: arbitration.round_of(dispute_id, 0).drawn, "the jury drawn")
    silent = arbitration.jurors_of(dispute_id, 0)[0]
    weight = verifiers.total_weight(model)
    voting = [v for v in market.verifiers if v.address != silent]
    everyone, market.verifiers = market.verifiers, voting
    try:
        jurors = [j for j in arbitration.jurors_of(dispute_id, 0) if j != silent]
        committed = lambda: all(any(arbitration.juror_of(dispute_id, 0, j).commitment) for j in jurors)  # noqa: E731
        market.step(committed, "the others committed")
        round0 = arbitration.round_of(dispute_id, 0)
        system.advance_chain_time(round0.commit_deadline - system.market.chain_time() + 1)
        revealed = lambda: all(arbitration.juror_of(dispute_id, 0, j).vote != Vote.NONE for j in jurors)  # noqa: E731
        market.step(revealed, "the others revealed")
        system.advance_chain_time(round0.appeal_deadline - system.market.chain_time() + 1)
        market.step(lambda: not verifiers.needs_reweigh(silent), "the silent juror reweighed")
    finally:
        market.verifiers = everyone
    assert arbitration.get_dispute(dispute_id).status == DisputeStatus.MINERS_CORRECT
    assert verifiers.verifier_of(silent).stake < verifiers.min_stake(), "penalized below one seat"
    assert verifiers.total_weight(model) == weight - 1, "its one seat of weight left the pool"
    assert not verifiers.judges(silent, model)
