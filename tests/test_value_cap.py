"""The value cap, from both sides: the SDK refuses a max price that leaves no room for one stake lock, and the
coordinator's count of how many stake locks fit is exactly what the contract accepts."""

from __future__ import annotations

import pytest
from eth_account.signers.local import LocalAccount

from client_sdk.chain.contracts import Market
from client_sdk.client import check_value_cap
from client_sdk.errors import ContractRevert, UserError
from coordinator.services.lifecycle import stake_lock_room
from demo.lifecycle import DemoConfig, accept_task, create_task
from tests.helpers import UNIT, register_miner


def test_the_sdk_refuses_a_max_price_above_the_cap(admin_market: Market) -> None:
    cap, lock = admin_market.tasks.max_value_at_risk(), admin_market.tasks.min_stake_lock()
    assert (cap, lock) == (900 * UNIT, 10 * UNIT)  # the deploy script's defaults
    check_value_cap(admin_market, cap - lock)
    with pytest.raises(UserError) as caught:
        check_value_cap(admin_market, cap - lock + 1)
    assert str(caught.value) == (
        "the max price 890.000001 is more than one task may put at stake: the cap is 900.000000 for the max "
        "price plus every miner's stake lock (10.000000 each), so at most 890.000000; split the batch"
    )


def test_the_coordinator_assigns_exactly_as_many_miners_as_fit(
    admin_market: Market, accounts: list[LocalAccount]
) -> None:
    coordinator, user, miners = accounts[1], accounts[2], accounts[3:9]
    for miner in miners:
        register_miner(admin_market, miner, 200 * UNIT)
    terms_cap, lock = admin_market.tasks.max_value_at_risk(), admin_market.tasks.min_stake_lock()
    max_price = terms_cap - 4 * lock + 1  # room for 3 locks, not 4
    admin_market.token.mint(user.address, max_price)
    task_id = create_task(admin_market.as_account(user), DemoConfig(max_price=max_price))
    terms = admin_market.tasks.terms_of(task_id)
    room = stake_lock_room(max_price, terms.min_stake_lock, terms.max_value_at_risk)
    assert room == 3
    assigner = admin_market.as_account(coordinator).tasks
    accepted = accept_task(admin_market, task_id, miners[: room + 1], lock)
    with pytest.raises(ContractRevert) as caught:
        assigner.assign_task(task_id, [m.address for m in miners[: room + 1]], lock, accepted)
    assert caught.value.error_name == "ValueAtRiskTooHigh"
    assigner.assign_task(task_id, [m.address for m in miners[:room]], lock, accepted[:room])
    assert admin_market.tasks.miners_of(task_id) == [m.address for m in miners[:room]]
