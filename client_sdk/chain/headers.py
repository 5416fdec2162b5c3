"""Block headers as the chain hashes them: the RLP list of a block's header fields, in the order of the fork
that made it. A header's keccak256 is its block's hash, which is how `BlockRandomness` knows that the mix hash
(`prevrandao`) it reads is the block's."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import rlp

# Every field a header has had, in order; a block has a prefix of them (later forks append).
HEADER_FIELDS = (
    "parentHash",
    "sha3Uncles",
    "miner",
    "stateRoot",
    "transactionsRoot",
    "receiptsRoot",
    "logsBloom",
    "difficulty",
    "number",
    "gasLimit",
    "gasUsed",
    "timestamp",
    "extraData",
    "mixHash",
    "nonce",
    "baseFeePerGas",
    "withdrawalsRoot",
    "blobGasUsed",
    "excessBlobGas",
    "parentBeaconBlockRoot",
    "requestsHash",
)


def _field(value: Any) -> bytes:
    """A field's RLP string: numbers big-endian without leading zeros, hex strings and bytes as they are."""
    if isinstance(value, int):
        return value.to_bytes((value.bit_length() + 7) // 8, "big")
    if isinstance(value, str):
        return bytes.fromhex(value.removeprefix("0x"))
    return bytes(value)


def header_rlp(block: Mapping[str, Any]) -> bytes:
    """The RLP-encoded header of `block` (an `eth_getBlockByNumber` result): the fields it has, in order, up
    to the first it lacks."""
    fields = []
    for name in HEADER_FIELDS:
        if name not in block:
            break
        fields.append(_field(block[name]))
    return bytes(rlp.encode(fields))
