"""The nesting check agrees with the JSON it guards: any document, however its strings are escaped, is
refused exactly when it nests deeper than the limit, and the check never recurses (a 100,000-level document is
refused, not a crash); integers are at most 80 digits long."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from client_sdk.bounded_json import OutOfBounds, TooDeep, TooLong, check_depth, loads

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
