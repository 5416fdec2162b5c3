"""JSON from untrusted sources, parsed only after a nesting check that does not recurse.

Python's json decoder recurses once per nesting level, guarded only by the interpreter's recursion limit,
which some libraries raise (py_ecc, pulled in by eth-account, sets it to 100,000): a body nested deep enough
then overflows the C stack and kills the process instead of raising. `check_depth` counts brackets outside
string literals with a regex scan that does not recurse (`DepthScan` does the same piece by piece, for a body
as it streams in), so the limit holds whatever the recursion limit is; JSON from anyone we do not control
(request bodies, JSONL lines, a coordinator's or a peer's answers) goes through `loads`, which also refuses
integers longer than any the protocol has (a uint256 has 78 digits; Python's own limit, 4,300 digits, raises a
bare ValueError deep in the decoder).
"""

from __future__ import annotations

import json
import re
from typing import Any

# Deeper than any message of the protocol (a chat request is about 6 levels), far below what recursion
# survives.
MAX_JSON_DEPTH = 64
MAX_INT_DIGITS = 80  # a uint256, its sign and a little room

# Outside a string: a whole string literal (from a quote to the next quote not escaped), a bracket, or a quote
# whose string does not end in this piece. For valid JSON this finds exactly the strings and the brackets; for
# invalid JSON the decoder stops at the first error, before any part this could misread.
_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]|"', re.DOTALL)
# Inside a string: as far as it goes in this piece (to its closing quote, or to a backslash ending the piece).
_STRING_REST = re.compile(rb'[^"\\]*(?:\\.[^"\\]*)*', re.DOTALL)
_OPENING = frozenset(b"[{")
_QUOTE = ord(b'"')


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
    DepthScan(max_depth).feed(raw)


class DepthScan:
    """The nesting check of a document that arrives in pieces (a request body as it streams in): `feed` raises
    TooDeep at the first piece with which the document nests deeper than `max_depth`. It keeps no piece: a
    string that spans pieces is followed by two flags, however long it is."""

    def __init__(self, max_depth: int = MAX_JSON_DEPTH) -> None:
        self.max_depth = max_depth
        self.depth = 0
        self.in_string = False
        self.escaped = False  # the last piece ended on a backslash inside a string: the next byte is escaped

    def feed(self, piece: bytes) -> None:
        position = self._string_end(piece, 0) if self.in_string else 0
        if position is None:
            return
        for token in _TOKEN.finditer(piece, position):
            mark = token.group()
            if len(mark) > 1:
                continue  # a whole string
            if mark[0] in _OPENING:
                self.depth += 1
                if self.depth > self.max_depth:
                    raise TooDeep(f"the JSON nests more than {self.max_depth} levels deep")
            elif mark[0] == _QUOTE:  # a string that goes on past this piece
                self.in_string = True
                self._string_end(piece, token.end())
                return
            else:
                self.depth -= 1

    def _string_end(self, piece: bytes, start: int) -> int | None:
        """Where the string the scan is in ends in `piece` (the position after its closing quote), or None if
        it goes on past the piece (then the flags say how the next piece starts)."""
        if self.escaped:
            if start >= len(piece):
                return None
            start, self.escaped = start + 1, False
        end = _STRING_REST.match(piece, start).end()  # type: ignore[union-attr]  # it matches the empty string
        if end < len(piece) and piece[end] == _QUOTE:
            self.in_string = False
            return end + 1
        self.escaped = end < len(piece)  # it stopped before a backslash that ends the piece
        return None


def loads(data: bytes | str, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """json.loads, after `check_depth`: TooDeep when too deep, TooLong for an integer of too many digits (both
    OutOfBounds, a ValueError), JSONDecodeError when malformed."""
    check_depth(data, max_depth)
    return json.loads(data, parse_int=_bounded_int)
