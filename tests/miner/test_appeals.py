"""A miner node appeals a conviction over a line it served whole (miner/node/appeals.py), on a real chain: a
jury that wrongly convicts in round 0 is appealed once, the larger jury finds the line correct, and the miner
gets its bond back on top of its pay; a line the node ran only part of, a bond above the bound and a round the
miners won are not appealed."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from eth_account.signers.local import LocalAccount

from client_sdk.chain.anvil import Anvil
from client_sdk.chain.contracts import Market
from client_sdk.chain.types import DisputeStatus, Vote
from client_sdk.protocol.task import TaskStatus
from demo.lifecycle import DemoConfig
from miner.node.appeals import Appealer
from miner.node.challenges import Answerer
from miner.node.journal import Journal, Served
from tests.helpers import Committed, committed_task, owner_disputes, past_appeal, register_verifier, run_round

LAYERS = 30  # the model's layers, as the node's config says


def node_of(
    admin: Market, miner: LocalAccount, task: Committed, path: Path, layers: int, max_bond: int | None = None
) -> Appealer:
    """The appealer of a node that signed `task` and journaled each of its lines with `layers` layers run.
    (`follow` runs it as the node's loop does: the answerer's check first.)"""
    mine = admin.as_account(miner)
    answerer = Answerer(mine.challenges, mine.tasks)
    answerer.signed(task.task_id, task.trees)
    journal = Journal(path / f"{miner.address}.jsonl")
    journal.accept(task.task_id, len(task.leaves))
    for leaf in task.leaves:
        journal.record(task.task_id, leaf.request_index, Served((1, 2), (3,), layers))
    return Appealer(mine, answerer, journal, LAYERS, max_bond)


def follow(appealer: Appealer) -> list[int]:
    """One turn of the node's loop over its signed work: the answerer's check, then the appealer's."""
    appealer.answerer.check()
    return appealer.check()


def test_a_node_wrongly_convicted_over_a_line_it_served_whole_appeals_and_is_found_correct(
    admin_market: Market, chain: Anvil, accounts: list[LocalAccount], tmp_path: Path
) -> None:
    coordinator, user, miners = accounts[1], accounts[2], accounts[3:5]
    jurors = {a.address: register_verifier(admin_market, a, seats=20) for a in accounts[6:10]}
    task = committed_task(admin_market, coordinator, user, miners)
    dispute_id = owner_disputes(admin_market, user, task)
    appealer = node_of(admin_market, miners[0], task, tmp_path, LAYERS)
    assert follow(appealer) == []  # nothing decided yet

    run_round(admin_market, chain, dispute_id, jurors, Vote.MINERS_AT_FAULT)  # the jury errs
    bond = 2 * admin_market.arbitration.round_of(dispute_id, 0).bond
    admin_market.token.mint(miners[0].address, bond)
    assert follow(appealer) == [dispute_id]
    assert follow(appealer) == []  # one appeal a round
    record = admin_market.arbitration.get_dispute(dispute_id)
    assert record.round == 1
    assert admin_market.arbitration.round_of(dispute_id, 1).bond_payer == miners[0].address
    assert admin_market.token.balance_of(miners[0].address) == 0  # the bond is posted

    run_round(admin_market, chain, dispute_id, jurors, Vote.MINERS_CORRECT)
    assert follow(appealer) == []  # a round the miners won is not appealed
    past_appeal(admin_market, chain, dispute_id)
    assert admin_market.arbitration.resolve(dispute_id) == DisputeStatus.MINERS_CORRECT

    # The miners: stake whole, paid as committed, the owner's forfeited bond less the jurors' reward shared
    # (dust to the first), and the appellant's bond back.
    terms = admin_market.arbitration.config_of(task.task_id)
    rest = terms.dispute_bond - terms.dispute_bond * terms.verifier_reward_bps // 10_000
    assert admin_market.tasks.get_task(task.task_id).status == TaskStatus.FINALIZED
    for i, miner in enumerate(miners):
        share = rest - rest // 2 if i == 0 else rest // 2
        expected = task.commitment.miner_amounts[i] + share + (bond if i == 0 else 0)
        assert admin_market.escrow.balance_of(miner.address) == expected
        stake = admin_market.registry.stake_of(miner.address)
        assert (stake.free, stake.locked) == (DemoConfig().miner_stake, 0)


@pytest.mark.parametrize(
    ("layers", "max_bond", "reason"),
    [
        (LAYERS - 1, None, f"it ran {LAYERS - 1} of the model's {LAYERS} layers of the line"),
        (LAYERS, 1, "is above the bound of"),
    ],
)
def test_a_node_does_not_appeal_what_it_cannot_vouch_for_or_what_costs_more_than_the_bound(
    admin_market: Market,
    chain: Anvil,
    accounts: list[LocalAccount],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    layers: int,
    max_bond: int | None,
    reason: str,
) -> None:
    coordinator, user, miners = accounts[1], accounts[2], accounts[3:5]
    jurors = {a.address: register_verifier(admin_market, a, seats=20) for a in accounts[6:10]}
    task = committed_task(admin_market, coordinator, user, miners)
    dispute_id = owner_disputes(admin_market, user, task)
    appealer = node_of(admin_market, miners[0], task, tmp_path, layers, max_bond)
    admin_market.token.mint(miners[0].address, 10**12)
    run_round(admin_market, chain, dispute_id, jurors, Vote.MINERS_AT_FAULT)
    with caplog.at_level(logging.WARNING, logger="batchmarket.miner"):
        assert follow(appealer) == []
        assert follow(appealer) == []
    refusals = [r.getMessage() for r in caplog.records if "not appealing" in r.getMessage()]
    assert len(refusals) == 1 and reason in refusals[0], refusals  # logged once
    assert admin_market.arbitration.get_dispute(dispute_id).round == 0
