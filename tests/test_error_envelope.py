"""The HTTP error envelope (client_sdk/protocol/envelope.py), which the coordinator writes and the SDK, the
miner node and the CLIs read: what is written reads back, and whatever else a server answers (any JSON value)
reads as "not an envelope" rather than raising."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from client_sdk.protocol.envelope import error_body, read_error

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=12,
)


@given(st.text(), st.text(), st.text(), st.none() | st.text())
def test_what_the_coordinator_writes_reads_back(
    error_type: str, message: str, code: str, param: str | None
) -> None:
    body = json.loads(json.dumps(error_body(error_type, message, code, param)))  # as it crosses the wire
    assert read_error(body) == (message, code)


@given(JSON)
def test_any_other_answer_is_not_an_envelope_and_never_raises(body: object) -> None:
    read = read_error(body)
    assert read is None or (isinstance(read[0], str) and (read[1] is None or isinstance(read[1], str)))


@given(st.text(), JSON)
def test_an_envelope_with_a_strange_code_keeps_its_message(message: str, code: object) -> None:
    read = read_error({"error": {"message": message, "code": code}})
    assert read == (message, code if isinstance(code, str) else None)
