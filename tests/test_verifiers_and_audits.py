"""The SDK's bindings for staked verifiers and random audits against the real contracts on anvil: a verifier
stakes, exits and withdraws; a committed task is drawn, sealed (the seed and the selection agree with the
definition, computed here independently), audited on its selected line by a verifier with the bond from the
pool, and the verdict refunds the owner and refills the pool. Refusals arrive as named contract errors."""

from __future__ import annotations

import pytest
from eth_abi.abi import encode
from eth_account.signers.local import LocalAccount
from eth_utils.crypto import keccak

from client_sdk.chain.anvil import Anvil
from client_sdk.chain.contracts import Market
from client_sdk.chain.types import DisputeStatus, TaskStatus, Verifier, Vote
from client_sdk.eip712 import sign_commitment
from client_sdk.errors import ContractRevert
from client_sdk.merkle import MerkleTree
from demo.lifecycle import DemoConfig, price_results, simulate_inference
from tests.helpers import UNIT, assigned_task


def register_verifier(admin: Market, verifier: LocalAccount) -> Market:
    """Mints the minimum stake to `verifier`, approves the arbitration contract and registers."""
    stake = admin.arbitration.min_verifier_stake()
    admin.token.mint(verifier.address, stake)
    mine = admin.as_account(verifier)
    mine.token.approve(mine.arbitration.address, stake)
    mine.arbitration.register_verifier(stake)
    return mine


def test_a_verifier_stakes_exits_and_withdraws(
    admin_market: Market, chain: Anvil, accounts: list[LocalAccount]
) -> None:
    verifier = accounts[6]
    assert admin_market.arbitration.min_verifier_stake() == 100 * UNIT  # the deploy script's default
    assert not admin_market.arbitration.is_verifier(verifier.address)
    assert admin_market.arbitration.verifier_of(verifier.address) == Verifier(0, 0, 0, 0)
    mine = register_verifier(admin_market, verifier)
    registered = admin_market.arbitration.verifier_of(verifier.address)
    assert registered.stake == 100 * UNIT and registered.active
    assert registered.registered_at_block == admin_market.w3.eth.block_number
    assert admin_market.arbitration.is_verifier(verifier.address)
    assert admin_market.token.balance_of(verifier.address) == 0

    with pytest.raises(ContractRevert) as caught:
        mine.arbitration.register_verifier(100 * UNIT)
    assert (caught.value.error_name, caught.value.error_args) == (
        "VerifierAlreadyRegistered",
        {"verifier": verifier.address},
    )

    mine.arbitration.request_verifier_exit()
    exiting = admin_market.arbitration.verifier_of(verifier.address)
    now = admin_market.chain_time()
    assert exiting.release_at == now + admin_market.arbitration.verifier_unbonding_period()
    assert exiting.registered and not exiting.active
    assert not admin_market.arbitration.is_verifier(verifier.address)
    with pytest.raises(ContractRevert) as caught:
        mine.arbitration.withdraw_verifier_stake()
    assert caught.value.error_name == "VerifierUnbondingNotFinished"
    assert caught.value.error_args["releaseAt"] == exiting.release_at

    chain.advance_time(admin_market.arbitration.verifier_unbonding_period())
    mine.arbitration.withdraw_verifier_stake()
    assert admin_market.token.balance_of(verifier.address) == 100 * UNIT
    assert not admin_market.arbitration.verifier_of(verifier.address).registered


def test_an_audit_of_a_selected_line_refunds_the_owner_and_refills_the_pool(
    admin_market: Market, chain: Anvil, accounts: list[LocalAccount]
) -> None:
    coordinator, user, miners, verifier, sponsor = (
        accounts[1],
        accounts[2],
        accounts[3:5],
        accounts[6],
        accounts[7],
    )
    auditor = register_verifier(admin_market, verifier)
    assert admin_market.arbitration.audit_rate_bps() == 1_000  # the deploy script's default: 10%
    admin_market.arbitration.set_audit_rate(10_000)  # so that this task is selected

    bond = admin_market.arbitration.dispute_bond()
    admin_market.token.mint(sponsor.address, 2 * bond)
    funder = admin_market.as_account(sponsor)
    funder.token.approve(funder.escrow.address, 2 * bond)
    funder.arbitration.fund_audit_pool(2 * bond)
    assert admin_market.escrow.audit_pool() == 2 * bond

    # A committed task: one leaf per request, served by both miners.
    config = DemoConfig()
    task_id = assigned_task(admin_market, coordinator, user, miners)
    leaves = simulate_inference(task_id, config, [m.address for m in miners])
    tree = MerkleTree([leaf.hash() for leaf in leaves])
    commitment = price_results(admin_market, task_id, leaves, config)
    chain_id, registry = admin_market.w3.eth.chain_id, admin_market.deployment.task_registry
    signatures = [sign_commitment(m, commitment, chain_id, registry) for m in miners]
    admin_market.as_account(coordinator).tasks.commit_results(commitment, signatures)

    with pytest.raises(ContractRevert) as caught:
        auditor.arbitration.open_audit(leaves[0], tree.proof(0))
    assert (caught.value.error_name, caught.value.error_args) == ("AuditNotSealed", {"taskId": task_id})

    admin_market.arbitration.draw_audit(task_id)
    drawn = admin_market.arbitration.audit_of(task_id)
    assert drawn.draw_block == admin_market.w3.eth.block_number and not drawn.sealed
    with pytest.raises(ContractRevert) as caught:
        admin_market.arbitration.seal_audit(task_id)
    assert caught.value.error_name == "AuditSeedNotReady"
    # The call is estimated against the latest block, which must come after the draw's: one block on.
    chain.advance_time(1)
    audit = admin_market.arbitration.seal_audit(task_id)

    # The definition, independently: seed = keccak(abi.encode(blockhash(draw block), taskId)).
    draw_hash = bytes(admin_market.w3.eth.get_block(drawn.draw_block)["hash"])
    seed = keccak(encode(["bytes32", "uint256"], [draw_hash, task_id]))
    line = int.from_bytes(keccak(encode(["bytes32", "uint256"], [seed, 1]))) % config.requests
    assert (audit.draw_block, audit.seed, audit.selected, audit.request_index) == (
        drawn.draw_block,
        seed,
        True,
        line,
    )

    other = (line + 1) % config.requests
    with pytest.raises(ContractRevert) as caught:
        auditor.arbitration.open_audit(leaves[other], tree.proof(other))
    assert caught.value.error_name == "NotAuditedLine"
    assert caught.value.error_args == {"taskId": task_id, "requestIndex": other, "selectedIndex": line}

    dispute_id = auditor.arbitration.open_audit(leaves[line], tree.proof(line))
    dispute = admin_market.arbitration.get_dispute(dispute_id)
    assert dispute.audit and dispute.challenger == user.address and dispute.request_index == line
    assert dispute.bond == bond and dispute.opened_at_block == admin_market.w3.eth.block_number
    assert admin_market.escrow.audit_pool() == bond
    assert admin_market.tasks.get_task(task_id).status == TaskStatus.DISPUTED

    auditor.arbitration.vote(dispute_id, Vote.MINERS_AT_FAULT)
    chain.advance_time(dispute.voting_deadline - admin_market.chain_time())
    assert admin_market.arbitration.resolve(dispute_id) == DisputeStatus.MINERS_AT_FAULT
    assert admin_market.escrow.audit_pool() == 2 * bond
    slashed = 2 * config.stake_lock
    reward = slashed * 1_000 // 10_000
    assert admin_market.escrow.balance_of(user.address) == config.max_price + slashed - reward
    assert admin_market.escrow.balance_of(verifier.address) == reward
