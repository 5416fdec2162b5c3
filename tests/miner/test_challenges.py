"""A miner node answers the owner's challenges of the lines of every task it signed, whatever its coordinator
does (an unanswered challenge slashes every signer): on a real chain, with the results tree it checked before
signing, it answers each open challenge once, leaves answered ones alone, and forgets a task once settled."""

from __future__ import annotations

from pathlib import Path

from eth_account.signers.local import LocalAccount

from client_sdk.chain.anvil import Anvil
from client_sdk.chain.contracts import Market
from client_sdk.chain.types import ChallengeStatus
from client_sdk.protocol.task import TaskStatus
from demo.lifecycle import DemoConfig
from miner.node.challenges import Answerer
from tests.conftest import CHALLENGE_WINDOW
from tests.helpers import committed_task


def test_a_signer_answers_each_open_challenge_of_a_task_it_signed(
    admin_market: Market, chain: Anvil, accounts: list[LocalAccount]
) -> None:
    coordinator, user, miners = accounts[1], accounts[2], [accounts[3], accounts[4]]
    done = committed_task(admin_market, coordinator, user, miners)
    task_id, last = done.task_id, DemoConfig().requests - 1
    answerer = Answerer(admin_market.as_account(miners[0]).challenges, admin_market.tasks)
    answerer.signed(task_id, done.trees)
    assert answerer.check() == []  # nothing challenged

    owner = admin_market.as_account(user).challenges
    for index in (0, last):
        owner.challenge_line(task_id, index)
    assert admin_market.tasks.get_task(task_id).status == TaskStatus.DISPUTED
    assert answerer.check() == [(task_id, 0), (task_id, last)]
    for index in (0, last):
        assert admin_market.challenges.challenge_of(task_id, index).status == ChallengeStatus.ANSWERED
    assert admin_market.tasks.get_task(task_id).status == TaskStatus.RESULTS_COMMITTED
    assert answerer.check() == []  # each answered once

    # a challenge the coordinator answers first is left to it
    owner.challenge_line(task_id, 1)
    assert admin_market.as_account(coordinator).challenges.answer_from(done.trees, [1]) == {1: None}
    assert answerer.check() == []

    chain.advance_time(2 * CHALLENGE_WINDOW)
    admin_market.tasks.finalize_task(task_id)
    assert answerer.check() == []
    assert answerer.following == []  # settled: forgotten
    config = DemoConfig()
    for miner, amount in zip(miners, done.commitment.miner_amounts, strict=True):
        assert admin_market.escrow.balance_of(miner.address) == amount
        assert admin_market.registry.stake_of(miner.address).free == config.miner_stake


def test_a_restarted_node_still_answers_for_what_it_signed(
    admin_market: Market, chain: Anvil, accounts: list[LocalAccount], tmp_path: Path
) -> None:
    """The trees are kept on disk before the signature goes out: a node restarted after signing answers the
    owner's challenge from them; a file that is not a kept tree is skipped, not fatal; a settled task's file
    is removed."""
    coordinator, user, miners = accounts[1], accounts[2], [accounts[3], accounts[4]]
    done = committed_task(admin_market, coordinator, user, miners)
    keep = tmp_path / "answering"
    signer_side = admin_market.as_account(miners[1])
    Answerer(signer_side.challenges, admin_market.tasks, keep).signed(done.task_id, done.trees)
    (keep / "not-a-task.json").write_text("{}")
    (keep / "7.json").write_text('{"miners": [], "leaves": [[[[[[')

    restarted = Answerer(signer_side.challenges, admin_market.tasks, keep)
    assert restarted.following == [done.task_id]
    admin_market.as_account(user).challenges.challenge_line(done.task_id, 2)
    assert restarted.check() == [(done.task_id, 2)]

    chain.advance_time(2 * CHALLENGE_WINDOW)
    admin_market.tasks.finalize_task(done.task_id)
    assert restarted.check() == []
    assert not (keep / f"{done.task_id}.json").exists()
