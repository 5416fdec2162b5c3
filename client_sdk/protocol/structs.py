"""On-chain structs as typed values: a frozen dataclass that mirrors a Solidity struct field for field is
built from the tuple web3 returns, each value converted by its field's type, and turned back into the tuple
web3 encodes, so no struct is decoded or encoded by hand."""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Iterable
from enum import IntEnum
from typing import Any, TypeVar

T = TypeVar("T")


def from_abi(cls: type[T], raw: Iterable[Any]) -> T:
    """`cls` (a dataclass, its fields in the struct's order) from a decoded struct: bytesN and bytes values
    become `bytes`, enum members their IntEnum, bools `bool`, nested structs their dataclass, arrays tuples of
    their element type; ints and address strings pass as they are. A tuple of another length is refused."""
    kinds = _field_kinds(cls)
    values = tuple(raw)
    if len(values) != len(kinds):
        raise ValueError(f"{cls.__name__} has {len(kinds)} fields; the struct has {len(values)}")
    return cls(*(_convert(kind, value) for kind, value in zip(kinds, values, strict=True)))


def to_abi(value: Any) -> tuple[Any, ...]:
    """The tuple web3 encodes for the struct that `value` (a dataclass, its fields in the struct's order)
    mirrors, the inverse of from_abi: nested structs become tuples, tuples arrays (lists), enum members ints;
    other values pass as they are."""
    return tuple(_abi_value(getattr(value, field.name)) for field in dataclasses.fields(value))


def _abi_value(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_abi(value)
    if isinstance(value, tuple):
        return [_abi_value(item) for item in value]
    if isinstance(value, IntEnum):
        return int(value)
    return value


_KINDS: dict[type, tuple[Any, ...]] = {}  # resolving a class's field types costs more than decoding one value


def _field_kinds(cls: type) -> tuple[Any, ...]:
    if cls not in _KINDS:
        hints = typing.get_type_hints(cls)
        _KINDS[cls] = tuple(hints[field.name] for field in dataclasses.fields(cls))
    return _KINDS[cls]


def _convert(kind: Any, value: Any) -> Any:
    if kind is bytes:
        return bytes(value)
    if kind is bool:
        return bool(value)
    if isinstance(kind, type) and issubclass(kind, IntEnum):
        return kind(value)
    if isinstance(kind, type) and dataclasses.is_dataclass(kind):
        return from_abi(kind, value)
    if typing.get_origin(kind) is tuple:
        element = typing.get_args(kind)[0]
        return tuple(_convert(element, item) for item in value)
    return value
