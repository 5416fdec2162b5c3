"""A transaction whose estimate passed can still revert once mined (the state moved in between, or its gas
fell short): the SDK says why as far as the chain tells, on a real anvil: out of gas when it used all its gas,
else the named error the same call raises on the block it was mined in."""

from __future__ import annotations

from eth_account.signers.local import LocalAccount
from web3.types import TxParams

from client_sdk.chain.contracts import Market
from client_sdk.chain.transactions import reverted_on_chain


def mined_as_is(market: Market, account: LocalAccount, tx: TxParams) -> tuple[bytes, object]:
    """Signs and sends `tx` as it is (no estimate) and waits for its receipt."""
    tx_hash = market.w3.eth.send_raw_transaction(account.sign_transaction(dict(tx)).raw_transaction)  # type: ignore[arg-type]
    return bytes(tx_hash), market.w3.eth.wait_for_transaction_receipt(tx_hash)


def test_a_transaction_reverted_on_chain_is_explained(
    admin_market: Market, accounts: list[LocalAccount]
) -> None:
    sender, to = accounts[8], accounts[7].address
    w3 = admin_market.w3
    call = admin_market.as_account(sender).token.contract.functions.transfer(to, 10)
    base = {"from": sender.address, "chainId": w3.eth.chain_id}

    # more than the sender holds: the token's own error, read by replaying the call on the block
    tx = call.build_transaction(
        {**base, "nonce": w3.eth.get_transaction_count(sender.address), "gas": 200_000}
    )
    tx_hash, receipt = mined_as_is(admin_market, sender, tx)
    assert receipt["status"] == 0  # type: ignore[index]
    error = reverted_on_chain(call, tx, receipt)  # type: ignore[arg-type]
    assert error.error_name == "ERC20InsufficientBalance"
    block = receipt["blockNumber"]  # type: ignore[index]
    assert str(error).startswith(
        f"transaction 0x{tx_hash.hex()} reverted on-chain in block {block}; replayed"
    )

    # enough tokens, too little gas for the transfer's storage writes
    admin_market.token.mint(sender.address, 10)
    tx = call.build_transaction(
        {**base, "nonce": w3.eth.get_transaction_count(sender.address), "gas": 30_000}
    )
    tx_hash, receipt = mined_as_is(admin_market, sender, tx)
    assert receipt["status"] == 0  # type: ignore[index]
    error = reverted_on_chain(call, tx, receipt)  # type: ignore[arg-type]
    assert (error.error_name, error.error_args) == ("OutOfGas", {"gas": 30_000})
    assert str(error).endswith(": it ran out of its 30000 gas")


def test_a_call_it_made_running_out_of_gas_is_named_out_of_gas(
    admin_market: Market, accounts: list[LocalAccount]
) -> None:
    """Out of gas inside a call (the audits contract into the escrow into the token) leaves the caller the
    64th EIP-150 keeps back, so the transaction reverts having used a little less than its limit: still out of
    gas, not a bare revert. Each limit below the estimate is mined as is."""
    funder = accounts[8]
    as_funder = admin_market.as_account(funder)
    admin_market.token.mint(funder.address, 10)
    as_funder.token.approve(admin_market.escrow.address, 10)
    call = as_funder.audits.contract.functions.fundAuditPool(10)
    w3 = admin_market.w3
    estimate = call.estimate_gas({"from": funder.address})
    below_its_limit = 0
    for short in (1, 500, 2_000, 5_000, 10_000, 20_000, 30_000):
        nonce = w3.eth.get_transaction_count(funder.address)
        tx = call.build_transaction(
            {"from": funder.address, "chainId": w3.eth.chain_id, "nonce": nonce, "gas": estimate - short}
        )
        _, receipt = mined_as_is(admin_market, funder, tx)
        if receipt["status"] == 1:  # type: ignore[index]
            continue  # the estimate has slack of its own
        error = reverted_on_chain(call, tx, receipt)  # type: ignore[arg-type]
        assert error.error_name == "OutOfGas", (short, str(error))
        below_its_limit += receipt["gasUsed"] < tx["gas"]  # type: ignore[index,operator]
    assert below_its_limit > 0, "no limit ran out inside a call: the case is not exercised"
    assert admin_market.escrow.balance_of(funder.address) == 0
