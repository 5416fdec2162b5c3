"""The SDK's bindings for staked verifiers, juries and random audits against the real contracts on anvil: a
verifier stakes, exits and withdraws; a committed task is drawn, sealed (the seed and the selection agree with
the definition, computed here independently), audited on its selected line by a verifier with the bond from
the pool, a jury that excludes the auditor convicts, and the money lands exactly where the rules say. Refusals
arrive as named contract errors."""

from __future__ import annotations

import pytest
from eth_abi.abi import encode
from eth_account.signers.local import LocalAccount
from eth_utils.crypto import keccak

from client_sdk.chain.anvil import Anvil
from client_sdk.chain.contracts import Market
from client_sdk.chain.types import DisputeStatus, Verifier, Vote
from client_sdk.errors import ContractRevert
from client_sdk.protocol.model_identity import model_id_of
from client_sdk.protocol.task import TaskStatus
from demo.lifecycle import MODEL, DemoConfig
from tests.helpers import (
    UNIT,
    committed_task,
    govern,
    past_appeal,
    register_verifier,
    run_round,
    set_audit_rate,
)


def test_a_verifier_stakes_exits_and_withdraws(
    admin_market: Market, chain: Anvil, accounts: list[LocalAccount]
) -> None:
    verifier = accounts[6]
    verifiers = admin_market.verifiers
    assert verifiers.min_stake() == 100 * UNIT  # the deploy script's default
    assert not verifiers.is_verifier(verifier.address)
    assert verifiers.verifier_of(verifier.address) == Verifier(0, 0, 0, 0, 0)
    model, other = model_id_of(MODEL), bytes(31) + b"\x07"
    weight = verifiers.total_weight(model)
    mine = register_verifier(admin_market, verifier, seats=2)
    registered = verifiers.verifier_of(verifier.address)
    assert registered.stake == 200 * UNIT and registered.active and registered.locked == 0
    assert registered.registered_at_block == admin_market.w3.eth.block_number
    assert verifiers.is_verifier(verifier.address)
    assert verifiers.total_weight(model) == weight + 2
    assert verifiers.models_of(verifier.address) == [model] and verifiers.judges(verifier.address, model)
    assert admin_market.token.balance_of(verifier.address) == 0
    mine.verifiers.add_model(other)  # it judges a second model: the same stake weighs in its pool too
    assert verifiers.total_weight(other) == 2 and verifiers.models_of(verifier.address) == [model, other]
    mine.verifiers.remove_model(other)
    assert verifiers.total_weight(other) == 0 and not verifiers.judges(verifier.address, other)

    with pytest.raises(ContractRevert) as caught:
        mine.verifiers.register(100 * UNIT, [model])
    assert (caught.value.error_name, caught.value.error_args) == (
        "VerifierAlreadyRegistered",
        {"verifier": verifier.address},
    )

    mine.verifiers.request_exit()
    assert verifiers.total_weight(model) == weight  # its weight left the pool
    exiting = verifiers.verifier_of(verifier.address)
    now = admin_market.chain_time()
    assert exiting.release_at == now + verifiers.unbonding_period()
    assert exiting.registered and not exiting.active
    assert not verifiers.is_verifier(verifier.address)
    with pytest.raises(ContractRevert) as caught:
        mine.verifiers.withdraw()
    assert caught.value.error_name == "VerifierUnbondingNotFinished"
    assert caught.value.error_args["releaseAt"] == exiting.release_at

    chain.advance_time(verifiers.unbonding_period())
    mine.verifiers.withdraw()
    assert admin_market.token.balance_of(verifier.address) == 200 * UNIT
    assert not verifiers.verifier_of(verifier.address).registered


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
    jurors = {a.address: register_verifier(admin_market, a) for a in (accounts[5], accounts[8], accounts[9])}
    assert admin_market.arbitration.config().audit_rate_bps == 1_000  # the deploy script's default: 10%
    set_audit_rate(admin_market, chain, 10_000)  # through the timelock, so that this task is selected

    bond = admin_market.arbitration.config().dispute_bond
    admin_market.token.mint(sponsor.address, 2 * bond)
    funder = admin_market.as_account(sponsor)
    funder.token.approve(funder.escrow.address, 2 * bond)
    funder.audits.fund_audit_pool(2 * bond)
    assert admin_market.escrow.audit_pool() == 2 * bond

    # A committed task: one leaf per request, served by both miners.
    config = DemoConfig()
    task = committed_task(admin_market, coordinator, user, miners)
    task_id, leaves, trees = task.task_id, task.leaves, task.trees

    with pytest.raises(ContractRevert) as caught:
        auditor.audits.open_audit(leaves[0], trees.proof(0), trees.served_proofs(0))
    assert (caught.value.error_name, caught.value.error_args) == ("AuditNotSealed", {"taskId": task_id})

    admin_market.audits.draw_audit(task_id)
    drawn = admin_market.audits.audit_of(task_id)
    assert drawn.seed_block == admin_market.w3.eth.block_number + 4 and not drawn.sealed
    with pytest.raises(ContractRevert) as caught:  # the seed block is not mined yet
        admin_market.audits.seal_audit(task_id)
    assert caught.value.error_name == "HeaderUnavailable"
    # Calls are estimated against the latest block, which must come after the seed block.
    while admin_market.w3.eth.block_number <= drawn.seed_block:
        chain.advance_time(1)
    audit = admin_market.audits.seal_audit(task_id)  # proves the seed block's prevrandao from its header

    # The definition, independently: seed = keccak(abi.encode(prevrandao of the seed block, taskId)).
    mix_hash = bytes(admin_market.w3.eth.get_block(drawn.seed_block)["mixHash"])
    assert admin_market.randomness.value_of(drawn.seed_block) == mix_hash
    seed = keccak(encode(["bytes32", "uint256"], [mix_hash, task_id]))
    line = int.from_bytes(keccak(encode(["bytes32", "uint256"], [seed, 1]))) % config.requests
    assert (audit.seed_block, audit.sealed, audit.seed, audit.selected, audit.request_index) == (
        drawn.seed_block,
        True,
        seed,
        True,
        line,
    )

    other = (line + 1) % config.requests
    with pytest.raises(ContractRevert) as caught:
        auditor.audits.open_audit(leaves[other], trees.proof(other), trees.served_proofs(other))
    assert caught.value.error_name == "NotAuditedLine"
    assert caught.value.error_args == {"taskId": task_id, "requestIndex": other, "selectedIndex": line}

    dispute_id = auditor.audits.open_audit(leaves[line], trees.proof(line), trees.served_proofs(line))
    dispute = admin_market.arbitration.get_dispute(dispute_id)
    assert dispute.audit and dispute.challenger == user.address and dispute.request_index == line
    assert dispute.bond == bond and dispute.opened_at_block == admin_market.w3.eth.block_number
    assert admin_market.escrow.audit_pool() == bond
    assert admin_market.tasks.get_task(task_id).status == TaskStatus.DISPUTED

    assert admin_market.audits.audit_of(task_id).dispute_id == dispute_id
    assert admin_market.arbitration.dispute_of_task(task_id) == 0, "the owner's own dispute is still free"

    drawn_jurors = run_round(admin_market, chain, dispute_id, jurors, Vote.MINERS_AT_FAULT)
    past_appeal(admin_market, chain, dispute_id)
    assert verifier.address not in drawn_jurors, "the auditor never sits on its own audit"
    seats = admin_market.arbitration.round_of(dispute_id, 0).seats_drawn
    assert seats == 5, "five seats, each landing by weight on one of three eligible verifiers"
    assert admin_market.arbitration.resolve(dispute_id) == DisputeStatus.MINERS_AT_FAULT
    slashed = 2 * config.stake_lock
    reward = slashed * 1_000 // 10_000
    # the bond back, the slash less the jurors' reward, and the dust: no party is paid a slash
    assert admin_market.escrow.audit_pool() == 2 * bond + slashed - reward + reward % seats
    assert admin_market.escrow.balance_of(user.address) == config.max_price, "the owner: refunded, no more"
    for juror in drawn_jurors:
        held = admin_market.arbitration.juror_of(dispute_id, 0, juror).seats
        assert admin_market.escrow.balance_of(juror) == reward // seats * held
        assert admin_market.verifiers.verifier_of(juror).locked == 0
    assert admin_market.escrow.balance_of(verifier.address) == 0, "the auditor is paid nothing for opening"


def test_the_audit_pool_is_spent_only_through_the_timelock(
    admin_market: Market, chain: Anvil, accounts: list[LocalAccount]
) -> None:
    """What accumulates in the pool has an owner: the admin's call, announced a delay ahead in the timelock,
    credits part of it to someone; the admin itself cannot spend it directly."""
    funder, treasury = accounts[6], accounts[7].address
    admin_market.token.mint(funder.address, 3 * UNIT)
    as_funder = admin_market.as_account(funder)
    as_funder.token.approve(admin_market.escrow.address, 3 * UNIT)
    pool = admin_market.escrow.audit_pool()
    as_funder.audits.fund_audit_pool(3 * UNIT)
    spend = admin_market.escrow.spend_audit_pool_call(treasury, 2 * UNIT)
    with pytest.raises(ContractRevert) as caught:
        admin_market.escrow._send(spend)
    assert caught.value.error_name == "AccessControlUnauthorizedAccount"
    govern(admin_market, chain, spend)
    assert admin_market.escrow.audit_pool() == pool + UNIT
    assert admin_market.escrow.balance_of(treasury) == 2 * UNIT
