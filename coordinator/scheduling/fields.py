"""Typed reads from parsed JSON objects; each failure is a one-line SchedulingError naming the field."""

from __future__ import annotations

import math
from typing import Any

from coordinator.scheduling.errors import SchedulingError


def number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise SchedulingError(f"{where}: expected a number, got {value!r}")
    return float(value)


def positive(value: Any, where: str) -> float:
    result = number(value, where)
    if result <= 0:
        raise SchedulingError(f"{where}: must be positive, got {result:g}")
    return result


def count(value: Any, where: str, minimum: int = 1) -> int:
    """A whole number of at least `minimum`."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise SchedulingError(f"{where}: expected a whole number, got {value!r}")
    if value < minimum:
        raise SchedulingError(f"{where}: must be at least {minimum}, got {value}")
    return value


def text(raw: dict[str, Any], key: str, where: str) -> str:
    value = raw.get(key)
    if not isinstance(value, str) or not value:
        raise SchedulingError(f"{where}.{key}: expected a non-empty string")
    return value
