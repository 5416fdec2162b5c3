"""The nesting check agrees with the JSON it guards: any document, however its strings are escaped, is
refused exactly when it nests deeper than the limit, and the check never recurses (a 100,000-level document is
refused, not a crash), and it says the same of a document fed in pieces, wherever they are cut (inside a
string, between a backslash and what it escapes); integers are at most 80 digits long."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from client_sdk.bounded_json import DepthScan, OutOfBounds, TooDeep, TooLong, check_depth, loads

# strings full of what a naive bracket count would miscount: brackets, quotes, backslashes
TRICKY = st.text(alphabet='[]{}"\\ab,:', max_size=12)
VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | TRICKY,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(TRICKY, children, max_size=3),
    max_leaves=30,
)


def depth(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max((depth(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((depth(v) for v in value.values()), default=0)
    return 0


@given(value=VALUES, limit=st.integers(min_value=0, max_value=8), ascii_only=st.booleans())
def test_refused_exactly_when_deeper_than_the_limit(value: Any, limit: int, ascii_only: bool) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only)
    if depth(value) > limit:
        with pytest.raises(TooDeep):
            check_depth(text, limit)
    else:
        assert loads(text, limit) == value


def pieces_of(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({0, len(data), *(c % (len(data) + 1) for c in cuts)})
    return [data[a:b] for a, b in itertools.pairwise(points)]


def fed(pieces: list[bytes], limit: int) -> bool:
    """Whether a scan fed these pieces found the document too deep (the pieces after that are never fed)."""
    scan = DepthScan(limit)
    try:
        for piece in pieces:
            scan.feed(piece)
    except TooDeep:
        return True
    return False


@given(
    value=VALUES,
    limit=st.integers(min_value=0, max_value=8),
    cuts=st.lists(st.integers(min_value=0), max_size=12),
    ascii_only=st.booleans(),
)
def test_fed_in_pieces_refused_exactly_when_deeper_than_the_limit(
    value: Any, limit: int, cuts: list[int], ascii_only: bool
) -> None:
    data = json.dumps(value, ensure_ascii=ascii_only).encode()
    assert fed(pieces_of(data, cuts), limit) == (depth(value) > limit)


@given(
    data=st.binary(max_size=60) | st.text(alphabet='[]{}"\\ab', max_size=60).map(str.encode),
    limit=st.integers(min_value=0, max_value=4),
    cuts=st.lists(st.integers(min_value=0), max_size=12),
)
def test_any_bytes_get_the_same_verdict_whole_or_in_pieces(data: bytes, limit: int, cuts: list[int]) -> None:
    assert fed(pieces_of(data, cuts), limit) == fed([data], limit)


def test_a_piece_boundary_between_a_backslash_and_its_quote_keeps_the_string_open() -> None:
    # ["a\"[[[ ... : the quote after the backslash is escaped, so the brackets after it are inside the string
    assert not fed([b'["a\\', b'"[[[[', b'"]'], 2)
    assert not fed([b'["a\\', b'"[[[["]'], 2)
    assert fed([b'["a\\\\', b'"[[[[', b"]]]]]"], 2)  # an escaped backslash: the quote ends the string


def test_a_very_deep_document_is_refused_not_a_crash() -> None:
    with pytest.raises(TooDeep, match="more than 64 levels"):
        loads("[" * 100_000 + "]" * 100_000)
    with pytest.raises(json.JSONDecodeError):
        loads('{"a": [1, 2}')


def test_an_integer_longer_than_any_the_protocol_has_is_refused() -> None:
    assert loads("[" + "9" * 80 + "]") == [int("9" * 80)]
    assert loads("-" + "9" * 79) == -int("9" * 79)
    with pytest.raises(TooLong, match="the JSON holds an integer of 81 digits"):
        loads("9" * 81)
    with pytest.raises(OutOfBounds):  # Python's own limit (4,300 digits) is never reached
        loads('{"max_tokens": ' + "1" * 5_000 + "}")
