"""Result leaves: one per request, bound to the task, its input and output, its token counts and its
pipeline. The encoding matches contracts/src/libraries/ResultLeaf.sol."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eth_abi.abi import encode
from eth_utils.address import to_checksum_address
from eth_utils.crypto import keccak

LEAF_TYPES = ["uint256", "uint32", "bytes32", "bytes32", "bytes32", "uint32", "uint32", "address[]"]


@dataclass(frozen=True)
class ResultLeaf:
    task_id: int
    request_index: int
    custom_id_hash: bytes
    input_hash: bytes
    output_hash: bytes
    input_tokens: int
    output_tokens: int
    pipeline: tuple[str, ...]

    def as_tuple(self) -> tuple[Any, ...]:
        return (
            self.task_id,
            self.request_index,
            self.custom_id_hash,
            self.input_hash,
            self.output_hash,
            self.input_tokens,
            self.output_tokens,
            [to_checksum_address(miner) for miner in self.pipeline],
        )

    def hash(self) -> bytes:
        """keccak256(keccak256(abi.encode(fields))): double-hashed so no inner node can pose as a leaf."""
        return bytes(keccak(keccak(encode(LEAF_TYPES, self.as_tuple()))))


PROOF_KEY = "x_batchmarket"  # our extension field on each output line; everything else is OpenAI's


def output_line_id(task_id: int, index: int) -> str:
    """The `id` of a result line (and the `request_id` of its response): fixed by the task and line, so
    every miner of the pipeline can rebuild the exact line it signs."""
    return f"batch_req_{task_id}_{index}"


def output_hash(line: dict[str, Any]) -> bytes:
    """keccak256 of an output (or error) line in canonical JSON, without our proof field."""
    from client_sdk.inputs import canonical_json

    return bytes(keccak(canonical_json({k: v for k, v in line.items() if k != PROOF_KEY})))
