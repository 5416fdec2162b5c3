"""Reading one field of a JSON message another party sent, checked against the type the contracts give it:
every refusal is a ValueError naming the message and the field ("the commitment's payment must be ...")."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeGuard

from eth_utils.address import is_address, to_checksum_address

from client_sdk.encoding import hex_bytes

_JSON_NAMES = {list: "array", str: "string", int: "integer", dict: "object"}


def is_int(value: object) -> TypeGuard[int]:
    """A JSON integer (a boolean is not one, though Python counts it as an int)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: object) -> TypeGuard[int | float]:
    """A JSON number: an integer or a float, not a boolean."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def field(message: Mapping[str, Any], name: str, kind: type, what: str) -> Any:
    """`message[name]`, which must be a JSON value of `kind` (a boolean is not an integer)."""
    if not isinstance(message, Mapping):
        raise ValueError(f"{what} is not an object")
    if name not in message:
        raise ValueError(f"{what} has no {name!r}")
    value = message[name]
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ValueError(f"{what}'s {name} must be a JSON {_JSON_NAMES[kind]}, not {value!r:.40}")
    return value


def uint(value: object, bits: int, name: str, what: str) -> int:
    """`value` as a uint<bits> (an integer in [0, 2^bits))."""
    if not is_int(value) or not 0 <= value < 2**bits:
        raise ValueError(f"{what}'s {name} must be an integer in [0, 2^{bits}), not {value!r:.40}")
    return value


def word(value: object, name: str, what: str) -> bytes:
    """`value`, a 32-byte word in hex (with or without 0x)."""
    try:
        raw = hex_bytes(value) if isinstance(value, str) else b""
    except ValueError:
        raw = b""
    if len(raw) != 32:
        raise ValueError(f"{what}'s {name} must be a 32-byte hex word, not {value!r:.80}")
    return raw


def words(values: object, name: str, what: str, most: int) -> tuple[bytes, ...]:
    """`values`, a JSON array of at most `most` 32-byte hex words."""
    if not isinstance(values, list) or len(values) > most:
        raise ValueError(f"{what}'s {name} must be an array of at most {most} hex words, not {values!r:.40}")
    return tuple(word(value, f"{name}[{i}]", what) for i, value in enumerate(values))


def addresses(values: object, name: str, what: str, most: int) -> tuple[str, ...]:
    """`values`, a JSON array of at most `most` Ethereum addresses, checksummed."""
    if not isinstance(values, list) or len(values) > most:
        raise ValueError(f"{what}'s {name} must be an array of at most {most} addresses, not {values!r:.40}")
    for i, value in enumerate(values):
        if not isinstance(value, str) or not is_address(value):
            raise ValueError(f"{what}'s {name}[{i}] must be an address, not {value!r:.50}")
    return tuple(to_checksum_address(value) for value in values)
