"""Paying for the tokens served, on a real chain: a commitment whose usage is not what its results sum tree
adds up to is refuted by anyone with one leaf's proof (the owner gets the escrow back, every signer's stake
lock goes to the audit pool, no party's, and a miner whose signature the commit left out is unlocked whole); a
true usage cannot be refuted and pays exactly its price."""

from __future__ import annotations

from dataclasses import replace

import pytest
from eth_account.signers.local import LocalAccount

from client_sdk.chain.contracts import Market
from client_sdk.eip712 import sign_commitment
from client_sdk.errors import ContractRevert
from client_sdk.protocol.task import TaskStatus
from client_sdk.results import ResultTrees
from demo.lifecycle import DemoConfig
from tests.helpers import assigned_task, committed_task, honest_results


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


def test_a_miner_left_out_of_an_overstated_commit_keeps_its_stake(
    admin_market: Market, accounts: list[LocalAccount]
) -> None:
    """Framing through refutation: the task's coordinator commits overstated totals that only its accomplice
    signed, the honest miner's signature left empty (and its share and served root zero, as for a miner left
    out); anyone refutes. The accomplice loses its lock to the pool; the honest miner, who never signed the
    false totals, gets its whole lock back, and the owner its whole escrow."""
    coordinator, user, stranger = accounts[1], accounts[2], accounts[6]
    accomplice, honest = accounts[3], accounts[4]
    config = DemoConfig()
    tasks, registry = admin_market.tasks, admin_market.registry
    task_id = assigned_task(admin_market, coordinator, user, [accomplice, honest])
    leaves, commitment = honest_results(admin_market, task_id, [accomplice, honest])
    output_tokens = commitment.output_tokens + 50_000
    payment = tasks.prices_of(task_id).cost(commitment.input_tokens, output_tokens, config.max_price)
    to_miners = payment - payment * tasks.coordinator_fee_bps() // 10_000
    overstated = replace(
        commitment,
        output_tokens=output_tokens,
        payment=payment,
        miner_amounts=(to_miners, 0),
        served_roots=(commitment.served_roots[0], bytes(32)),
    )
    signed = sign_commitment(
        accomplice,
        overstated,
        accomplice.address,
        admin_market.w3.eth.chain_id,
        admin_market.deployment.task_registry,
    )
    admin_market.as_account(coordinator).tasks.commit_results(overstated, [signed, b""])
    assert tasks.signed_mask_of(task_id) == 0b01
    before = {m.address: registry.stake_of(m.address) for m in (accomplice, honest)}
    pool = admin_market.escrow.audit_pool()

    trees = ResultTrees(leaves, [accomplice.address, honest.address])
    admin_market.as_account(stranger).tasks.refute_usage(leaves[1], trees.proof(1))

    assert tasks.get_task(task_id).status == TaskStatus.FINALIZED
    assert admin_market.escrow.balance_of(user.address) == config.max_price
    assert admin_market.escrow.audit_pool() == pool + config.stake_lock, "the signer's lock alone"
    framed, slashed = registry.stake_of(honest.address), registry.stake_of(accomplice.address)
    assert (framed.free, framed.locked) == (before[honest.address].free + config.stake_lock, 0), (
        "unlocked whole"
    )
    assert (slashed.free, slashed.locked) == (before[accomplice.address].free, 0)
    for account in (accomplice, honest, stranger):
        assert admin_market.escrow.balance_of(account.address) == 0
