"""Twenty submissions at once from one wallet (each through its own SDK connection, as threads of one program
would make them) all go through: the SDK hands out nonces one after another instead of racing for the same."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from eth_account.signers.local import LocalAccount
from eth_utils.crypto import keccak

from client_sdk.chain.contracts import Market
from client_sdk.chain.types import TaskPrices
from client_sdk.protocol.model_identity import model_id_of
from demo.lifecycle import MODEL, DemoConfig


def test_twenty_concurrent_task_creations_from_one_wallet_all_succeed(
    admin_market: Market, accounts: list[LocalAccount]
) -> None:
    user, config = accounts[2], DemoConfig()
    admin_market.token.mint(user.address, 20 * config.max_price)
    mine = admin_market.as_account(user)
    mine.token.approve(mine.escrow.address, 20 * config.max_price)
    before, deadline = admin_market.tasks.task_count(), admin_market.chain_time() + 86_400

    def submit(line: int) -> int:
        return admin_market.as_account(user).tasks.create_task(
            model_id=model_id_of(MODEL),
            input_root=keccak(text=f"input file {line}"),
            request_count=config.requests,
            params_hash=keccak(text="{}"),
            max_price=config.max_price,
            deadline=deadline,
            prices=TaskPrices(config.price_per_million_tokens, config.price_per_million_tokens),
        )

    with ThreadPoolExecutor(max_workers=20) as pool:
        task_ids = list(pool.map(submit, range(20)))
    assert sorted(task_ids) == list(range(before + 1, before + 21))
    assert all(admin_market.tasks.get_task(t).owner == user.address for t in task_ids)
