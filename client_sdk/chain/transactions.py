"""Signs and sends contract transactions from a local key, turning reverts into named errors. Sends from one
wallet are serialized from nonce choice to broadcast: each reads the node's pending count only after the one
before it has reached the node, so concurrent submissions never collide on a nonce (and nothing is cached that
a reverted or dropped transaction could leave too high). Within a process a lock per (chain, sender) does it;
processes that share a key (a coordinator's workers) pass a lock they share (`SendingLock`, e.g. in Redis).
A transaction not mined within the receipt timeout is replaced: the same nonce sent again with fees raised by
a quarter, up to MAX_REPLACEMENTS times."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from eth_account.signers.local import LocalAccount
from hexbytes import HexBytes
from web3 import Web3
from web3.contract.contract import ContractFunction
from web3.exceptions import ContractCustomError, ContractLogicError, TimeExhausted
from web3.types import Nonce, TxParams, TxReceipt, Wei

from client_sdk.chain.reverts import decode_revert
from client_sdk.errors import ContractRevert

# Estimates can fall short when state moves between estimate and inclusion: a fifth more, and a fixed margin
# for the storage writes another transaction can add to the same call (a counter that dropped back to zero
# costs 20,000 gas to raise again: an owner's second line challenge sent while the first was being answered
# ran out of gas). Unused gas is not charged.
GAS_HEADROOM = 1.2
GAS_MARGIN = 60_000
RECEIPT_TIMEOUT_S = 120.0
MAX_REPLACEMENTS = 3
FEE_BUMP = 1.25  # nodes accept a replacement only with fees at least 10% higher
# held from reading the pending nonce until the transaction has reached the node, per (chain id, sender)
SendingLock = Callable[[tuple[int, str]], AbstractContextManager[Any]]

_GUARD = threading.Lock()
# per (chain, sender): held from reading the pending nonce until the transaction has reached the node
_SENDING: dict[tuple[int, str], threading.Lock] = {}


def _sending_lock(key: tuple[int, str]) -> threading.Lock:
    with _GUARD:
        return _SENDING.setdefault(key, threading.Lock())


class Transactor:
    """Sends transactions as `account`: estimate (which surfaces reverts early), sign, send, wait; `shared`
    serializes sends with other processes using the same key."""

    def __init__(
        self,
        w3: Web3,
        account: LocalAccount,
        shared: SendingLock | None = None,
        receipt_timeout_s: float = RECEIPT_TIMEOUT_S,
    ) -> None:
        self.w3 = w3
        self.account = account
        self.shared = shared
        self.receipt_timeout_s = receipt_timeout_s

    @property
    def address(self) -> str:
        return str(self.account.address)

    def send(self, call: ContractFunction) -> TxReceipt:
        sender = self.account.address
        try:
            # Estimated in the block it will land in: gas can depend on the block (a checkpoint written in a
            # new block costs a new slot, in the same block an update).
            gas = call.estimate_gas({"from": sender}, block_identifier="pending")
        except ContractLogicError as exc:
            raise _rejection(exc) from None
        chain_id = self.w3.eth.chain_id
        key = (chain_id, sender)
        shared = self.shared(key) if self.shared is not None else contextlib.nullcontext()
        with _sending_lock(key), shared:
            nonce = self.w3.eth.get_transaction_count(sender, "pending")
            params: TxParams = {
                "from": sender,
                "nonce": Nonce(nonce),
                "gas": int(gas * GAS_HEADROOM) + GAS_MARGIN,
                "chainId": chain_id,
            }
            tx = call.build_transaction(params)
            hashes = [self._broadcast(tx)]
        for _ in range(MAX_REPLACEMENTS):
            try:
                return self._receipt(call, tx, hashes[-1])
            except TimeExhausted:
                tx = _bumped(tx)
                hashes.append(self._broadcast(tx))
        return self._receipt(call, tx, hashes[-1])

    def _broadcast(self, tx: TxParams) -> bytes:
        signed = self.account.sign_transaction(dict(tx))  # type: ignore[arg-type]
        return bytes(self.w3.eth.send_raw_transaction(signed.raw_transaction))

    def _receipt(self, call: ContractFunction, tx: TxParams, tx_hash: bytes) -> TxReceipt:
        receipt = self.w3.eth.wait_for_transaction_receipt(HexBytes(tx_hash), timeout=self.receipt_timeout_s)
        if receipt["status"] != 1:
            raise reverted_on_chain(call, tx, receipt)
        return receipt


def reverted_on_chain(call: ContractFunction, tx: TxParams, receipt: TxReceipt) -> ContractRevert:
    """Why a mined transaction of `call` reverted, as far as the chain tells after its estimate passed: out of
    gas when it used all it had, else the error the same call raises at the end of its block (the state it met
    may have moved on: the message says where the reason comes from), else out of gas in a call it made when
    it used nearly all its gas (all but what each call level keeps back, a 64th of what it had: EIP-150),
    else a bare revert."""
    where = (
        f"transaction 0x{bytes(receipt['transactionHash']).hex()} reverted on-chain in block "
        f"{receipt['blockNumber']}"
    )
    limit = int(tx["gas"])
    if receipt["gasUsed"] >= limit:
        return ContractRevert("OutOfGas", {"gas": limit}, f"{where}: it ran out of its {limit} gas")
    try:
        call.call({"from": tx["from"]}, block_identifier=receipt["blockNumber"])
    except ContractLogicError as exc:
        named = _rejection(exc)
        return ContractRevert(named.error_name, named.error_args, f"{where}; replayed on that block: {named}")
    if receipt["gasUsed"] * 32 >= limit * 31:  # a few call levels deep, each keeping its 64th
        why = f"{where}: a call it made ran out of gas (it used nearly all its {limit})"
        return ContractRevert("OutOfGas", {"gas": limit}, why)
    return ContractRevert("Reverted", {}, where)


def _bumped(tx: TxParams) -> TxParams:
    """The same transaction (same nonce) with its fees raised by FEE_BUMP, to replace it in the pool."""
    fees = ("maxFeePerGas", "maxPriorityFeePerGas") if "maxFeePerGas" in tx else ("gasPrice",)
    bumped = dict(tx)
    for name in fees:
        bumped[name] = Wei(int(int(tx[name]) * FEE_BUMP) + 1)  # type: ignore[literal-required]
    return bumped  # type: ignore[return-value]


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
