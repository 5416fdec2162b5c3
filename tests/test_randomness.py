"""The randomness juries and audits draw from, on anvil: a block's header as the SDK encodes it hashes to the
block's hash, so the contract takes the block's own mix hash (`prevrandao`); a header made up by anyone is
refused by name, and a block not mined yet has no value."""

from __future__ import annotations

import pytest
from web3 import Web3

from client_sdk.chain.anvil import Anvil
from client_sdk.chain.contracts import Market
from client_sdk.chain.headers import header_rlp
from client_sdk.errors import ContractRevert


def test_every_header_the_sdk_encodes_hashes_to_its_block(admin_market: Market, chain: Anvil) -> None:
    chain.advance_time(1)
    latest = admin_market.w3.eth.block_number
    for number in range(max(0, latest - 5), latest + 1):
        block = admin_market.w3.eth.get_block(number)
        assert Web3.keccak(header_rlp(block)) == block["hash"]


def test_a_block_s_value_is_its_mix_hash_and_nothing_else_proves(admin_market: Market, chain: Anvil) -> None:
    randomness = admin_market.randomness
    chain.advance_time(1)
    number = admin_market.w3.eth.block_number
    with pytest.raises(ContractRevert) as caught:  # a block not mined yet has no header
        randomness.prove(number + 2)
    assert (caught.value.error_name, caught.value.error_args) == (
        "HeaderUnavailable",
        {"blockNumber": number + 2},
    )
    block = admin_market.w3.eth.get_block(number)  # the latest block: its proof lands in the next one
    forged = header_rlp(dict(block, mixHash=bytes(31) + b"\x01"))
    with pytest.raises(ContractRevert) as caught:
        randomness._send(randomness.contract.functions.prove(number, forged))
    assert caught.value.error_name == "HeaderMismatch"
    assert randomness.value_of(number) == bytes(32) and not randomness.is_expired(number)
    assert randomness.prove(number) == bytes(block["mixHash"]) != bytes(32)
    assert randomness.prove(number) == bytes(block["mixHash"])  # again: the value kept, nothing sent
