"""Turns revert data into named contract errors, using the custom errors of every packaged ABI."""

from __future__ import annotations

from functools import cache
from typing import Any, cast

from eth_abi.abi import decode
from eth_utils.abi import function_signature_to_4byte_selector
from eth_utils.address import to_checksum_address
from hexbytes import HexBytes

from client_sdk.abis import CONTRACT_NAMES, load_abi
from client_sdk.errors import ContractRevert
from client_sdk.units import format_utc

_ERROR_STRING = bytes.fromhex("08c379a0")  # Error(string)

# The errors that mean "not yet", and the argument saying from when: a block number or a chain timestamp. A
# devnet whose anvil mines only when a transaction comes never gets there by waiting; the message says how to.
_NOT_YET_BLOCK = {"JuryNotDrawable": "readyAtBlock", "AuditSeedNotReady": "readyAtBlock"}
_NOT_YET_TIME = {
    "ChallengeWindowOpen": "endsAt",
    "AnswerPeriodNotOver": "answerBy",
    "DeadlineNotPassed": "deadline",
    "ReleaseNotDue": "releaseAt",
    "UnbondingNotFinished": "releaseAt",
    "VerifierUnbondingNotFinished": "releaseAt",
}
_DEVNET_CLOCK = "docs/coordinator.md#devnet-recipes"


def _abi_type(param: dict[str, Any]) -> str:
    if param["type"].startswith("tuple"):
        inner = ",".join(_abi_type(c) for c in param["components"])
        return f"({inner}){param['type'][5:]}"
    return str(param["type"])


@cache
def _error_table() -> dict[bytes, tuple[str, list[str], list[str]]]:
    table: dict[bytes, tuple[str, list[str], list[str]]] = {}
    for contract in CONTRACT_NAMES:
        for item in load_abi(contract):
            if item["type"] != "error":
                continue
            types = [_abi_type(p) for p in item["inputs"]]
            names = [p["name"] or f"arg{i}" for i, p in enumerate(item["inputs"])]
            selector = function_signature_to_4byte_selector(f"{item['name']}({','.join(types)})")
            table[selector] = (item["name"], types, names)
    return table


def _render(value: object) -> str:
    if isinstance(value, bytes):
        return "0x" + value.hex()
    return str(value)


def decode_revert(data: str | bytes | None) -> ContractRevert:
    """A ContractRevert naming the custom error in `data`, or a generic one when it is unknown."""
    raw = bytes(HexBytes(data)) if data else b""
    selector, payload = raw[:4], raw[4:]
    if selector == _ERROR_STRING:
        (reason,) = decode(["string"], payload)
        return ContractRevert("Error", {"reason": reason}, f"the contract rejected the call: {reason}")
    entry = _error_table().get(selector)
    if entry is None:
        shown = "0x" + raw.hex() if raw else "no data"
        return ContractRevert("Unknown", {}, f"the contract rejected the call ({shown})")
    name, types, names = entry
    values = [
        to_checksum_address(value) if abi_type == "address" else value
        for abi_type, value in zip(types, decode(types, payload), strict=True)
    ]
    args = dict(zip(names, values, strict=True))
    rendered = ", ".join(f"{k}={_render(v)}" for k, v in args.items())
    return ContractRevert(
        name, args, f"the contract rejected the call: {name}({rendered}){_when(name, args)}"
    )


def _when(name: str, args: dict[str, object]) -> str:
    """For an error that means "not yet": when the call becomes possible, and how a devnet gets there."""
    if name in _NOT_YET_BLOCK:
        block = args[_NOT_YET_BLOCK[name]]
        return (
            f"; not yet: possible once the chain has mined block {block} (a local anvil that mines only "
            f"on transactions: run it with --block-time 1, or `cast rpc anvil_mine 10`; {_DEVNET_CLOCK})"
        )
    if name in _NOT_YET_TIME:
        when = format_utc(cast(int, args[_NOT_YET_TIME[name]]))
        return (
            f"; not yet: possible after {when} of chain time (a local anvil: run it with --block-time 1 "
            "so that its clock follows the wall clock, or `cast rpc evm_increaseTime SECONDS` then "
            f"`cast rpc evm_mine`; {_DEVNET_CLOCK})"
        )
    return ""
