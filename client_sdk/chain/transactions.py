"""Signs and sends contract transactions from a local key, turning reverts into named errors. Sends from one
wallet in one process are serialized from nonce choice to broadcast: each reads the node's pending count only
after the one before it has reached the node, so concurrent submissions never collide on a nonce (and nothing
is cached that a reverted or dropped transaction could leave too high)."""

from __future__ import annotations

import threading
from typing import Any

from eth_account.signers.local import LocalAccount
from web3 import Web3
from web3.contract.contract import ContractFunction
from web3.exceptions import ContractCustomError, ContractLogicError
from web3.types import Nonce, TxParams, TxReceipt

from client_sdk.chain.reverts import decode_revert
from client_sdk.errors import ContractRevert

GAS_HEADROOM = 1.2  # estimates can fall short when state moves between estimate and inclusion

_GUARD = threading.Lock()
# per (chain, sender): held from reading the pending nonce until the transaction has reached the node
_SENDING: dict[tuple[int, str], threading.Lock] = {}


def _sending_lock(key: tuple[int, str]) -> threading.Lock:
    with _GUARD:
        return _SENDING.setdefault(key, threading.Lock())


class Transactor:
    """Sends transactions as `account`: estimate (which surfaces reverts early), sign, send, wait."""

    def __init__(self, w3: Web3, account: LocalAccount) -> None:
        self.w3 = w3
        self.account = account

    @property
    def address(self) -> str:
        return str(self.account.address)

    def send(self, call: ContractFunction) -> TxReceipt:
        sender = self.account.address
        try:
            gas = call.estimate_gas({"from": sender})
        except ContractLogicError as exc:
            raise _rejection(exc) from None
        chain_id = self.w3.eth.chain_id
        key = (chain_id, sender)
        with _sending_lock(key):
            nonce = self.w3.eth.get_transaction_count(sender, "pending")
            params: TxParams = {
                "from": sender,
                "nonce": Nonce(nonce),
                "gas": int(gas * GAS_HEADROOM),
                "chainId": chain_id,
            }
            tx = call.build_transaction(params)
            signed = self.account.sign_transaction(dict(tx))  # type: ignore[arg-type]
            tx_hash = self.w3.eth.send_raw_transaction(signed.raw_transaction)
        receipt = self.w3.eth.wait_for_transaction_receipt(tx_hash, timeout=120)
        if receipt["status"] != 1:
            raise ContractRevert("Reverted", {}, f"transaction {tx_hash.hex()} reverted on-chain")
        return receipt


def call_view(call: ContractFunction) -> Any:
    """The result of a read-only call, a revert turned into a named error as for transactions."""
    try:
        return call.call()
    except ContractLogicError as exc:
        raise _rejection(exc) from None


def _rejection(exc: ContractLogicError) -> ContractRevert:
    if isinstance(exc, ContractCustomError):
        return decode_revert(_revert_data(exc))
    return ContractRevert("Error", {}, f"the contract rejected the call: {exc.message}")


def _revert_data(exc: ContractCustomError) -> Any:
    data = exc.data
    if isinstance(data, dict):  # some providers nest the revert data
        data = data.get("data")
    return data
