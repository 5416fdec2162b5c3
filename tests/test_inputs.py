"""Input hashing: keccak256 is Ethereum's, whatever the input and whichever thread hashes; canonical JSON is
sorted, compact UTF-8; input leaves match abi.encode; a request line proves only at its own index."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from eth_abi import encode
from eth_utils.crypto import keccak
from hypothesis import given
from hypothesis import strategies as st

from client_sdk.inputs import canonical_json, input_leaf, input_tree, line_hash
from client_sdk.merkle import keccak256
from client_sdk.verify import is_input_line

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4),
    max_leaves=12,
)


@given(st.binary(max_size=600))
def test_keccak256_is_ethereums(data: bytes) -> None:
    assert keccak256(data) == keccak(data)


@pytest.fixture
def frequent_thread_switches() -> Iterator[None]:
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(interval)


@pytest.mark.usefixtures("frequent_thread_switches")
def test_threads_hashing_at_once_each_get_their_own_digests() -> None:
    inputs = [bytes([i % 256]) * (i % 300) for i in range(40_000)]
    shares = [inputs[i::4] for i in range(4)]
    with ThreadPoolExecutor(max_workers=4) as pool:  # tight loops, so threads switch in the middle of a hash
        digests = list(pool.map(lambda share: [keccak256(data) for data in share], shares))
    assert digests == [[keccak(data) for data in share] for share in shares]


@given(JSON)
def test_canonical_json_is_sorted_compact_utf8(value: Any) -> None:
    expected = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    assert canonical_json(value) == expected


@given(st.integers(0, 2**32 - 1), st.text(min_size=1, max_size=40), JSON)
def test_input_leaf_double_hashes_the_abi_encoded_fields(index: int, custom_id: str, body: Any) -> None:
    line = {"custom_id": custom_id, "body": body}
    fields = encode(["uint32", "bytes32", "bytes32"], [index, keccak(custom_id.encode()), line_hash(line)])
    assert input_leaf(index, custom_id, line_hash(line)) == keccak(keccak(fields))


def test_input_tree_commits_to_every_line_in_order() -> None:
    lines = [{"custom_id": f"req-{i}", "body": {"n": i}} for i in range(5)]
    root = input_tree(lines).root
    assert input_tree(list(reversed(lines))).root != root
    assert input_tree([*lines[:4], {**lines[4], "body": {"n": 5}}]).root != root


LINES = st.lists(
    st.builds(lambda cid, text: {"custom_id": cid, "body": {"prompt": text}}, st.text(max_size=8), st.text()),
    min_size=1,
    max_size=12,
    unique_by=lambda line: line["custom_id"],
)


@given(lines=LINES, data=st.data())
def test_a_request_line_is_proven_at_its_own_index_only(
    lines: list[dict[str, Any]], data: st.DataObject
) -> None:
    """What a verifier checks of dispute evidence: the request line is the task's input line at that index."""
    tree = input_tree(lines)
    index = data.draw(st.integers(min_value=0, max_value=len(lines) - 1))
    other = data.draw(st.integers(min_value=0, max_value=len(lines) - 1))
    proof = tree.proof(index)
    assert is_input_line(tree.root, index, lines[index], proof)
    assert is_input_line(tree.root, other, lines[index], proof) == (other == index)
    edited = dict(lines[index], body={"prompt": "something else"})
    assert not is_input_line(tree.root, index, edited, proof) or edited == lines[index]
    assert not is_input_line(tree.root, index, {"body": {}}, proof)  # no custom_id at all
