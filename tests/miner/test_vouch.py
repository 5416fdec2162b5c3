"""A miner node bypasses a coordinator that withholds the commit of results the miners served and signed
(real chain): asked to release the task, or left waiting past the grace period, each node vouches on-chain for
the commitment it signed; the coordinator's release is then refused for good, and once every miner has vouched
a node commits, and everyone is paid exactly at finalization. A task its coordinator commits is only
forgotten."""

from __future__ import annotations

import pytest
from eth_account.signers.local import LocalAccount

from client_sdk.chain.anvil import Anvil
from client_sdk.chain.contracts import Market
from client_sdk.eip712 import ResultCommitment, sign_commitment
from client_sdk.errors import ContractRevert
from client_sdk.protocol.task import TaskStatus
from miner.node.vouch import Voucher
from tests.helpers import assigned_task, honest_results

GRACE_S = 600.0


class Clock:
    """Wall time a test moves by hand (the grace period is the node's own clock, not the chain's)."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def parties(accounts: list[LocalAccount]) -> tuple[LocalAccount, LocalAccount, list[LocalAccount]]:
    return accounts[1], accounts[2], accounts[3:5]


def voucher_of(market: Market, miner: LocalAccount, clock: Clock) -> Voucher:
    return Voucher(market.as_account(miner).tasks, market.w3.eth.chain_id, GRACE_S, clock)


def signed_by_both(
    market: Market, parties: tuple[LocalAccount, LocalAccount, list[LocalAccount]]
) -> tuple[int, ResultCommitment, Clock, list[Voucher]]:
    """An assigned task, the results both miners signed, and each miner's voucher told so."""
    coordinator, user, miners = parties
    task_id = assigned_task(market, coordinator, user, miners)
    _, commitment = honest_results(market, task_id, miners)
    clock = Clock()
    vouchers = [voucher_of(market, miner, clock) for miner in miners]
    for voucher in vouchers:
        voucher.signed(commitment)
    return task_id, commitment, clock, vouchers


def test_a_release_request_makes_the_miners_vouch_and_commit(
    chain: Anvil,
    admin_market: Market,
    parties: tuple[LocalAccount, LocalAccount, list[LocalAccount]],
) -> None:
    coordinator, _, miners = parties
    task_id, commitment, _, vouchers = signed_by_both(admin_market, parties)
    for voucher in vouchers:
        voucher.check()  # the coordinator is neither late nor releasing: nothing is sent
    assert admin_market.tasks.vouches_of(task_id) == []

    as_coordinator = admin_market.as_account(coordinator).tasks
    as_coordinator.request_release(task_id)
    vouchers[0].check()
    assert admin_market.tasks.get_task(task_id).status == TaskStatus.ASSIGNED  # one vouch is not everyone's
    chain.advance_time(admin_market.tasks.release_notice())
    with pytest.raises(ContractRevert) as refused:
        as_coordinator.release_task(task_id)
    assert refused.value.error_name == "TaskVouched"

    vouchers[1].check()  # vouches, sees everyone has, and commits
    assert admin_market.tasks.get_task(task_id).status == TaskStatus.RESULTS_COMMITTED
    assert admin_market.tasks.signed_mask_of(task_id) == 0b11
    vouchers[0].check()  # the task is committed: only forgotten
    assert vouchers[0].following == vouchers[1].following == []

    before = {m.address: admin_market.escrow.balance_of(m.address) for m in miners}
    chain.advance_time(admin_market.tasks.terms_of(task_id).challenge_window)
    admin_market.tasks.finalize_task(task_id)
    for miner, amount in zip(miners, commitment.miner_amounts, strict=True):
        assert admin_market.escrow.balance_of(miner.address) - before[miner.address] == amount


def test_a_coordinator_late_past_the_grace_period_is_bypassed(
    admin_market: Market, parties: tuple[LocalAccount, LocalAccount, list[LocalAccount]]
) -> None:
    task_id, commitment, clock, vouchers = signed_by_both(admin_market, parties)
    clock.now += GRACE_S - 1
    vouchers[0].check()
    assert admin_market.tasks.vouches_of(task_id) == []
    clock.now += 1
    for voucher in vouchers:
        voucher.check()
    assert admin_market.tasks.get_task(task_id).status == TaskStatus.RESULTS_COMMITTED
    assert admin_market.tasks.miner_amounts_of(task_id) == list(commitment.miner_amounts)


def test_results_the_coordinator_commits_are_only_forgotten(
    admin_market: Market, parties: tuple[LocalAccount, LocalAccount, list[LocalAccount]]
) -> None:
    coordinator, _, miners = parties
    task_id, commitment, clock, [voucher, _] = signed_by_both(admin_market, parties)
    chain_id, registry = admin_market.w3.eth.chain_id, admin_market.deployment.task_registry
    signatures = [sign_commitment(miner, commitment, miner.address, chain_id, registry) for miner in miners]
    admin_market.as_account(coordinator).tasks.commit_results(commitment, signatures)
    clock.now += GRACE_S
    voucher.check()
    assert voucher.following == []
    assert admin_market.tasks.vouches_of(task_id) == []


def test_a_node_signing_after_a_release_request_vouches_before_handing_over(
    chain: Anvil,
    admin_market: Market,
    parties: tuple[LocalAccount, LocalAccount, list[LocalAccount]],
) -> None:
    """A coordinator that asked to release early, to release the moment it has the signatures: each node sees
    the request when it signs and vouches before its signature leaves it, so the release is refused."""
    coordinator, user, miners = parties
    task_id = assigned_task(admin_market, coordinator, user, miners)
    as_coordinator = admin_market.as_account(coordinator).tasks
    as_coordinator.request_release(task_id)
    chain.advance_time(admin_market.tasks.release_notice())
    _, commitment = honest_results(admin_market, task_id, miners)
    clock = Clock()
    for miner in miners:
        voucher_of(admin_market, miner, clock).signed(commitment)
    with pytest.raises(ContractRevert) as refused:
        as_coordinator.release_task(task_id)
    assert refused.value.error_name == "TaskVouched"
    admin_market.as_account(user).tasks.commit_results(commitment, [b"", b""])  # anyone, on the vouches
    assert admin_market.tasks.get_task(task_id).status == TaskStatus.RESULTS_COMMITTED
