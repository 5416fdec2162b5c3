"""Twenty submissions at once from one wallet (each through its own SDK connection, as threads of one program
would make them) all go through: the SDK hands out nonces one after another instead of racing for the same,
and each submission's approval of exactly its escrow is spent before the next one's replaces it. A transaction
that is not mined in time is replaced, same nonce, higher fees."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from eth_account.signers.local import LocalAccount

from client_sdk.chain.contracts import Market
from client_sdk.chain.transactions import Transactor
from demo.lifecycle import DemoConfig
from tests.helpers import demo_task_for


def test_twenty_concurrent_task_creations_from_one_wallet_all_succeed(
    admin_market: Market, accounts: list[LocalAccount]
) -> None:
    user, config = accounts[2], DemoConfig()
    admin_market.token.mint(user.address, 20 * config.max_price)
    mine = admin_market.as_account(user)
    mine.token.approve(mine.escrow.address, 20 * config.max_price)
    before, deadline = admin_market.tasks.task_count(), admin_market.chain_time() + 86_400

    def submit(line: int) -> int:
        return demo_task_for(admin_market.as_account(user), f"input file {line}", deadline)

    with ThreadPoolExecutor(max_workers=20) as pool:
        task_ids = list(pool.map(submit, range(20)))
    assert sorted(task_ids) == list(range(before + 1, before + 21))
    assert all(admin_market.tasks.get_task(t).owner == user.address for t in task_ids)


def test_twenty_concurrent_submissions_each_approving_its_own_escrow_all_succeed(
    admin_market: Market, accounts: list[LocalAccount]
) -> None:
    """As `Client.batches.create_task` does it: approve the escrow for this task's max price if the allowance
    falls short, then create the task (once 2 of 20 succeeded: approvals overwrote each other unspent)."""
    user, config = accounts[8], DemoConfig()
    admin_market.token.mint(user.address, 20 * config.max_price)
    held = admin_market.token.balance_of(user.address)
    before, deadline = admin_market.tasks.task_count(), admin_market.chain_time() + 86_400

    def submit(line: int) -> int:
        mine = admin_market.as_account(user)
        with mine.token.allowing(user.address, mine.escrow.address, config.max_price):
            return demo_task_for(mine, f"approved input {line}", deadline)

    with ThreadPoolExecutor(max_workers=20) as pool:
        task_ids = list(pool.map(submit, range(20)))
    assert sorted(task_ids) == list(range(before + 1, before + 21))
    assert admin_market.token.balance_of(user.address) == held - 20 * config.max_price
    assert admin_market.token.allowance(user.address, admin_market.escrow.address) == 0


def test_a_transaction_not_mined_in_time_is_replaced_with_higher_fees(
    admin_market: Market, accounts: list[LocalAccount]
) -> None:
    """With mining paused the first broadcast is never mined: once its wait times out the same nonce goes out
    again with fees raised by a quarter, and that replacement is what gets mined, exactly once."""
    w3, sender, receiver = admin_market.w3, accounts[6], accounts[7]
    admin_market.token.mint(sender.address, 5)
    transactor = Transactor(w3, sender, receipt_timeout_s=0.5)
    call = admin_market.token.contract.functions.transfer(receiver.address, 5)
    nonce = w3.eth.get_transaction_count(sender.address)
    before = admin_market.token.balance_of(receiver.address)
    w3.provider.make_request("evm_setAutomine", [False])  # type: ignore[arg-type]
    try:
        with ThreadPoolExecutor(max_workers=1) as pool:
            sending = pool.submit(transactor.send, call)
            first = _pooled(w3, sender.address, nonce, None)
            replacement = _pooled(w3, sender.address, nonce, first["hash"])
            w3.provider.make_request("evm_mine", [])  # type: ignore[arg-type]
            receipt = sending.result(timeout=60)
    finally:
        w3.provider.make_request("evm_setAutomine", [True])  # type: ignore[arg-type]
    assert receipt["status"] == 1 and "0x" + bytes(receipt["transactionHash"]).hex() == replacement["hash"]
    assert int(replacement["maxFeePerGas"], 16) > int(first["maxFeePerGas"], 16) * 1.2
    assert w3.eth.get_transaction_count(sender.address) == nonce + 1
    assert admin_market.token.balance_of(receiver.address) == before + 5


def _pooled(w3: Any, sender: str, nonce: int, other_than: str | None) -> dict[str, str]:
    """The pending pool's transaction from `sender` at `nonce`, once there is one whose hash is not
    `other_than`."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        pending = w3.provider.make_request("txpool_content", [])["result"]["pending"]
        mine = {k.lower(): v for k, v in pending.items()}.get(sender.lower(), {})
        tx = mine.get(str(nonce))
        if tx is not None and tx["hash"] != other_than:
            return dict(tx)
        time.sleep(0.05)
    raise AssertionError(f"no pooled transaction at nonce {nonce} other than {other_than}")
