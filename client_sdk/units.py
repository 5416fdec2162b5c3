"""Token amounts: the payment token has 6 decimals; users write amounts like "100" or "12.5"."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation, localcontext

from client_sdk.errors import UserError

TOKEN_DECIMALS = 6
_SCALE = 10**TOKEN_DECIMALS
_MAX_DIGITS = 90  # a uint256 has 78 digits; longer input is not an amount


def parse_amount(text: str) -> int:
    """Parses a decimal token amount into base units, exactly; rejects negatives and excess precision."""
    if len(text) > _MAX_DIGITS:
        raise UserError(f"not a token amount: {text[:20]!r}... is too long")
    with localcontext(prec=_MAX_DIGITS * 2):  # exact for anything a uint256 can hold
        try:
            value = Decimal(text.strip())
        except InvalidOperation:
            raise UserError(f"not a token amount: {text!r}") from None
        if not value.is_finite() or value < 0:
            raise UserError(f"not a token amount: {text!r}")
        scaled = value * _SCALE
        if scaled != scaled.to_integral_value():
            raise UserError(f"{text} has more than {TOKEN_DECIMALS} decimals")
        return int(scaled)


def format_amount(base_units: int) -> str:
    """Formats base units with all six decimals, e.g. 100500000 -> '100.500000'."""
    sign = "-" if base_units < 0 else ""
    whole, frac = divmod(abs(base_units), _SCALE)
    return f"{sign}{whole}.{frac:0{TOKEN_DECIMALS}d}"


def format_utc(timestamp: int) -> str:
    """A Unix timestamp (chain or wall-clock seconds) as people read it, in UTC: 2026-12-02 01:29:00 UTC."""
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def format_duration(seconds: int) -> str:
    """A span of time as people read it, to the two largest units: 45s, 3m 05s, 2h 10m, 3d 04h."""
    seconds = abs(int(seconds))
    days, rest = divmod(seconds, 86_400)
    hours, rest = divmod(rest, 3_600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours:02d}h"
    if hours:
        return f"{hours}h {minutes:02d}m"
    if minutes:
        return f"{minutes}m {secs:02d}s"
    return f"{secs}s"
