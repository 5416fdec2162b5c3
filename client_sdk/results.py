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
