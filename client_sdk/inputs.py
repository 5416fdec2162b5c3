"""Input leaves: the Merkle root of a batch's request lines, which the task commits to on-chain.

A line is hashed in canonical JSON (sorted keys, no whitespace, UTF-8), so the SDK and the coordinator agree
on the root whatever spacing the user's file had. Leaves are double-hashed like result leaves.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from eth_abi.abi import encode
from eth_utils.crypto import keccak

from client_sdk.merkle import MerkleTree

INPUT_LEAF_TYPES = ["uint32", "bytes32", "bytes32"]


def canonical_json(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def line_hash(line: dict[str, Any]) -> bytes:
    """keccak256 of a request line in canonical JSON (the result leaf's `inputHash`)."""
    return bytes(keccak(canonical_json(line)))


def custom_id_hash(custom_id: str) -> bytes:
    return bytes(keccak(custom_id.encode()))


def input_leaf(index: int, custom_id: str, hashed_line: bytes) -> bytes:
    return bytes(keccak(keccak(encode(INPUT_LEAF_TYPES, (index, custom_id_hash(custom_id), hashed_line)))))


def input_tree(lines: Sequence[dict[str, Any]]) -> MerkleTree:
    """The tree over a batch's lines in file order (each line has its `custom_id`)."""
    return MerkleTree([input_leaf(i, line["custom_id"], line_hash(line)) for i, line in enumerate(lines)])


def params_hash(endpoint: str, completion_window: str) -> bytes:
    """What the on-chain task's `paramsHash` commits to besides the model and the input root."""
    return bytes(keccak(canonical_json({"completion_window": completion_window, "endpoint": endpoint})))
