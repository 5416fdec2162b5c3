"""Paying for the tokens served, on a real chain: a commitment whose usage is not what its results sum tree
adds up to is refuted by anyone with one leaf's proof (the owner gets the escrow back, every signer's stake
lock goes to the audit pool, no party's); a true usage cannot be refuted and pays exactly its price."""

from __future__ import annotations

import pytest
from eth_account.signers.local import LocalAccount

from client_sdk.chain.contracts import Market
from client_sdk.errors import ContractRevert
from client_sdk.protocol.task import TaskStatus
from demo.lifecycle import DemoConfig
from tests.helpers import committed_task


def test_an_overstated_usage_is_refuted_and_the_owner_made_whole(
    admin_market: Market, accounts: list[LocalAccount]
) -> None:
    coordinator, user, miners, stranger = accounts[1], accounts[2], accounts[3:5], accounts[6]
    config = DemoConfig()
    task = committed_task(admin_market, coordinator, user, miners, extra_output_tokens=50_000)
    tasks, registry = admin_market.tasks, admin_market.registry
    charged = tasks.get_task(task.task_id)
    assert charged.output_tokens == task.trees.usage.output_tokens + 50_000
    assert charged.payment == tasks.prices_of(task.task_id).cost(
        task.trees.usage.input_tokens, charged.output_tokens, config.max_price
    )
    wallet = admin_market.token.balance_of(user.address)
    stakes = [registry.stake_of(m.address) for m in miners]
    pool = admin_market.escrow.audit_pool()

    admin_market.as_account(stranger).tasks.refute_usage(task.leaves[1], task.trees.proof(1))

    assert tasks.get_task(task.task_id).status == TaskStatus.FINALIZED
    assert admin_market.escrow.balance_of(user.address) == config.max_price
    assert admin_market.escrow.audit_pool() == pool + len(miners) * config.stake_lock
    assert admin_market.escrow.balance_of(stranger.address) == 0
    assert admin_market.token.balance_of(user.address) == wallet
    for miner, before in zip(miners, stakes, strict=True):
        after = registry.stake_of(miner.address)
        assert (after.free, after.locked) == (before.free, 0)
        assert before.locked == config.stake_lock
        assert admin_market.escrow.balance_of(miner.address) == 0


def test_a_true_usage_cannot_be_refuted(admin_market: Market, accounts: list[LocalAccount]) -> None:
    coordinator, user, miners = accounts[1], accounts[2], accounts[3:5]
    task = committed_task(admin_market, coordinator, user, miners)
    for i, leaf in enumerate(task.leaves):
        with pytest.raises(ContractRevert, match="UsageMatches"):
            admin_market.tasks.refute_usage(leaf, task.trees.proof(i))
    committed = admin_market.tasks.get_task(task.task_id)
    assert (committed.input_tokens, committed.output_tokens) == (
        task.trees.usage.input_tokens,
        task.trees.usage.output_tokens,
    )
    assert committed.status == TaskStatus.RESULTS_COMMITTED
