"""What every page is made of: figures (a value as people read it, the full value behind it and where it comes
from) and the formatting they share. Pure: no I/O."""

from __future__ import annotations

from dataclasses import dataclass

from client_sdk.units import format_amount, format_duration, format_utc


@dataclass(frozen=True)
class Source:
    """Where a figure comes from: an API route (`href`: a GET a visitor can follow) or a contract call (no
    `href`: the call is named, with its arguments)."""

    label: str
    href: str | None = None


@dataclass(frozen=True)
class Figure:
    """One value shown: `text` as people read it, `title` the full value it shortens (an address, a hash, a
    time), `source` where it was read, and `href` a page of the explorer it leads to."""

    text: str
    source: Source
    title: str | None = None
    href: str | None = None


def api(path: str, note: str = "") -> Source:
    """A figure read from the coordinator's API route `path` (GET); `note` names the field."""
    return Source(f"GET {path}{f' {note}' if note else ''}", path)


def call(contract: str, function: str, *args: object) -> Source:
    """A figure read on-chain with `contract.function(args)`."""
    return Source(f"{contract}.{function}({', '.join(str(a) for a in args)})")


def short(value: str, keep: int = 6) -> str:
    """An address or a hash shortened to its head and tail: 0x1234…cdef."""
    return value if len(value) <= 2 * keep + 3 else f"{value[:keep]}…{value[-4:]}"


def hex0x(value: bytes) -> str:
    return "0x" + bytes(value).hex()


def amount(base_units: int, symbol: str) -> str:
    """Token base units as people read them: 5.000000 mUSD."""
    return f"{format_amount(base_units)} {symbol}"


def relative(at: int, now: int) -> str:
    """A moment against `now`: "in 3m 05s", "4m 10s ago", "now"."""
    if at == now:
        return "now"
    return f"in {format_duration(at - now)}" if at > now else f"{format_duration(now - at)} ago"


def moment(at: int, now: int, source: Source) -> Figure:
    """A time as a duration from `now`, with the UTC time behind it; an unset time (0) is a dash."""
    if not at:
        return Figure("—", source)
    return Figure(relative(at, now), source, title=format_utc(at))


def address(value: str, source: Source) -> Figure:
    return Figure(short(value), source, title=value)


def digest(value: str, source: Source) -> Figure:
    """A hash (0x-hex); the zero hash and None are a dash."""
    if not value or int(value, 16) == 0:
        return Figure("—", source)
    return Figure(short(value, 10), source, title=value)


def count(value: int, source: Source) -> Figure:
    return Figure(f"{value:,}", source)
