"""JSON from untrusted sources, parsed only after a nesting check that does not recurse.

Python's json decoder recurses once per nesting level, guarded only by the interpreter's recursion limit,
which some libraries raise (py_ecc, pulled in by eth-account, sets it to 100,000): a body nested deep enough
then overflows the C stack and kills the process instead of raising. `check_depth` counts brackets outside
string literals in one regex pass, so the limit holds whatever the recursion limit is; JSON from anyone we
do not control (request bodies, JSONL lines, a coordinator's or a peer's answers) goes through `loads`, which
also refuses integers longer than any the protocol has (a uint256 has 78 digits; Python's own limit, 4,300
digits, raises a bare ValueError deep in the decoder).
"""

from __future__ import annotations

import json
import re
from typing import Any

# Deeper than any message of the protocol (a chat request is about 6 levels), far below what recursion
# survives.
MAX_JSON_DEPTH = 64
MAX_INT_DIGITS = 80  # a uint256, its sign and a little room

# A JSON string literal: from a quote to the next quote not escaped. For valid JSON this finds exactly the
# strings; for invalid JSON, the decoder stops at the first error, before any part this could misread.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_BRACKETS = re.compile(rb"[\[\]{}]")


class OutOfBounds(ValueError):
    """The document is beyond what is parsed: too deep, or a number too long."""


class TooDeep(OutOfBounds):
    """The document nests deeper than the limit."""


class TooLong(OutOfBounds):
    """The document holds an integer of more than MAX_INT_DIGITS digits."""


def _bounded_int(text: str) -> int:
    if len(text) > MAX_INT_DIGITS:
        raise TooLong(f"the JSON holds an integer of {len(text)} digits (at most {MAX_INT_DIGITS})")
    return int(text)


def check_depth(data: bytes | str, max_depth: int = MAX_JSON_DEPTH) -> None:
    """Raises TooDeep if `data` nests arrays and objects more than `max_depth` levels deep."""
    raw = data.encode() if isinstance(data, str) else data
    if raw.count(b"[") + raw.count(b"{") <= max_depth:
        return  # it cannot nest deeper than the brackets it opens (most documents: two C scans, no regex)
    depth = 0
    for bracket in _BRACKETS.findall(_STRING.sub(b'""', raw)):
        if bracket in (b"[", b"{"):
            depth += 1
            if depth > max_depth:
                raise TooDeep(f"the JSON nests more than {max_depth} levels deep")
        else:
            depth -= 1


def loads(data: bytes | str, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """json.loads, after `check_depth`: TooDeep when too deep, TooLong for an integer of too many digits (both
    OutOfBounds, a ValueError), JSONDecodeError when malformed."""
    check_depth(data, max_depth)
    return json.loads(data, parse_int=_bounded_int)
