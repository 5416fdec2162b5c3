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
