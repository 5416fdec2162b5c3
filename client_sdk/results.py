"""Result leaves and the trees a task's results are committed in.

One leaf per request, bound to the task, its position, its input and output, its token counts and its pipeline
(the encoding matches contracts/src/libraries/ResultLeaf.sol). The results tree is a positional sum tree of
exactly one leaf per request of the task, so its root also fixes the task's total token usage; each assigned
miner also signs the root of a sorted-pair tree over the leaves whose pipeline names it (its served root, zero
when it served none): the only leaves its signature vouches for and the only ones a dispute can slash it
over."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from eth_abi.abi import encode
from eth_utils.address import to_checksum_address
from eth_utils.crypto import keccak

from client_sdk.merkle import MerkleTree, SumTree, Usage
from client_sdk.protocol.constants import MAX_MINERS_PER_TASK
from client_sdk.protocol.fields import addresses, field, uint, word, words
from client_sdk.protocol.structs import to_abi

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
        """The ITaskRegistry.ResultLeaf struct, its pipeline checksummed (web3 takes no other addresses)."""
        return to_abi(dataclasses.replace(self, pipeline=tuple(map(to_checksum_address, self.pipeline))))

    @classmethod
    def unserved(
        cls, task_id: int, request_index: int, custom_id_hash: bytes, input_hash: bytes
    ) -> ResultLeaf:
        """The leaf of a request no miner served (a cancelled batch's lines that never ran): no output, no
        tokens, no pipeline, so no one is paid or can be disputed over it."""
        return cls(task_id, request_index, custom_id_hash, input_hash, ZERO_ROOT, 0, 0, ())

    @property
    def usage(self) -> Usage:
        return Usage(self.input_tokens, self.output_tokens)

    def hash(self) -> bytes:
        """keccak256(keccak256(abi.encode(fields))): double-hashed so no inner node can pose as a leaf."""
        return bytes(keccak(keccak(encode(LEAF_TYPES, self.as_tuple()))))

    def to_json(self) -> dict[str, Any]:
        """The leaf as JSON (the task id travels beside it): how a coordinator's usage witness names it."""
        return {
            "index": self.request_index,
            "custom_id_hash": "0x" + self.custom_id_hash.hex(),
            "input_hash": "0x" + self.input_hash.hex(),
            "output_hash": "0x" + self.output_hash.hex(),
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "pipeline": list(self.pipeline),
        }

    @classmethod
    def from_json(cls, task_id: int, data: Mapping[str, Any]) -> ResultLeaf:
        """The inverse of `to_json`, checked against ResultLeaf.sol's types; ValueError naming the field."""
        what = "the leaf"
        return cls(
            task_id=task_id,
            request_index=uint(field(data, "index", int, what), 32, "index", what),
            custom_id_hash=word(field(data, "custom_id_hash", str, what), "custom_id_hash", what),
            input_hash=word(field(data, "input_hash", str, what), "input_hash", what),
            output_hash=word(field(data, "output_hash", str, what), "output_hash", what),
            input_tokens=uint(field(data, "input_tokens", int, what), 32, "input_tokens", what),
            output_tokens=uint(field(data, "output_tokens", int, what), 32, "output_tokens", what),
            pipeline=addresses(field(data, "pipeline", list, what), "pipeline", what, MAX_MINERS_PER_TASK),
        )


ZERO_ROOT = bytes(32)
MAX_RESULTS_PROOF_WORDS = 128  # two words per level of a tree of at most 2^64 leaves (TaskRegistry's bound)
MAX_SERVED_PROOF_WORDS = 64


@dataclass(frozen=True)
class LineProof:
    """What a result line carries in its PROOF_KEY field: the fields of its leaf that the line itself does not
    give (the rest are the hashes of the line and of its custom_id), its positional proof in the results tree
    and, for each miner of its pipeline, its proof in that miner's served tree."""

    index: int
    input_hash: bytes
    input_tokens: int
    output_tokens: int
    pipeline: tuple[str, ...]
    proof: tuple[bytes, ...]
    served_proofs: tuple[tuple[bytes, ...], ...]

    @classmethod
    def of(cls, trees: ResultTrees, index: int) -> LineProof:
        """Leaf `index` of `trees`, with its proofs."""
        leaf = trees.leaves[index]
        return cls(
            leaf.request_index,
            leaf.input_hash,
            leaf.input_tokens,
            leaf.output_tokens,
            leaf.pipeline,
            tuple(trees.proof(index)),
            tuple(tuple(p) for p in trees.served_proofs(index)),
        )

    def leaf(self, task_id: int, custom_id_hash: bytes, output_hash: bytes) -> ResultLeaf:
        """The leaf of the line these fields came with (its custom_id's hash and its own hash given)."""
        return ResultLeaf(
            task_id,
            self.index,
            custom_id_hash,
            self.input_hash,
            output_hash,
            self.input_tokens,
            self.output_tokens,
            self.pipeline,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "input_hash": "0x" + self.input_hash.hex(),
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "pipeline": list(self.pipeline),
            "proof": ["0x" + p.hex() for p in self.proof],
            "served_proofs": [["0x" + p.hex() for p in proofs] for proofs in self.served_proofs],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> LineProof:
        """The inverse of `to_json`, checked against the contracts' types and bounds; ValueError naming the
        field."""
        what = f"the line's {PROOF_KEY}"
        pipeline = addresses(field(data, "pipeline", list, what), "pipeline", what, MAX_MINERS_PER_TASK)
        served = field(data, "served_proofs", list, what)
        if len(served) != len(pipeline):
            raise ValueError(
                f"{what}'s served_proofs must hold one proof per pipeline entry ({len(pipeline)})"
            )
        return cls(
            index=uint(field(data, "index", int, what), 32, "index", what),
            input_hash=word(field(data, "input_hash", str, what), "input_hash", what),
            input_tokens=uint(field(data, "input_tokens", int, what), 32, "input_tokens", what),
            output_tokens=uint(field(data, "output_tokens", int, what), 32, "output_tokens", what),
            pipeline=pipeline,
            proof=words(field(data, "proof", list, what), "proof", what, MAX_RESULTS_PROOF_WORDS),
            served_proofs=tuple(
                words(proofs, f"served_proofs[{i}]", what, MAX_SERVED_PROOF_WORDS)
                for i, proofs in enumerate(served)
            ),
        )


class ResultTrees:
    """The positional results sum tree over one task's leaves (one per request, in request order) and each
    assigned miner's served tree, with the proofs a dispute of any leaf needs."""

    def __init__(self, leaves: Sequence[ResultLeaf], miners: Sequence[str]) -> None:
        if [leaf.request_index for leaf in leaves] != list(range(len(leaves))):
            raise ValueError("a results tree needs exactly one leaf per request, in request order")
        self.leaves = list(leaves)
        self._hashes = [leaf.hash() for leaf in leaves]
        self.results = SumTree(self._hashes, [leaf.usage for leaf in leaves])
        self.miners = tuple(miners)

    @cached_property
    def _served(self) -> dict[str, tuple[MerkleTree, dict[int, int]]]:
        """Each miner's served tree and where each of its leaves sits in it; built on first use, so a caller
        that needs only the results tree (a miner's signing request, an audit line) does not pay for them."""
        served = {}
        for miner in self.miners:
            mine = [leaf.request_index for leaf in self.leaves if miner in leaf.pipeline]
            tree = served_tree({index: self._hashes[index] for index in mine})
            if tree is not None:
                served[miner] = (tree, {index: slot for slot, index in enumerate(mine)})
        return served

    @property
    def root(self) -> bytes:
        return self.results.root

    @property
    def usage(self) -> Usage:
        """The tokens all the leaves add up to: what the commitment states and the task is paid for."""
        return self.results.usage

    def served_root(self, miner: str) -> bytes:
        """The root `miner` signs: of the leaves whose pipeline names it, ZERO_ROOT if none."""
        served = self._served.get(miner)
        return served[0].root if served else ZERO_ROOT

    def served_roots(self) -> tuple[bytes, ...]:
        """One per assigned miner, in assignment order (the commitment's `servedRoots`)."""
        return tuple(self.served_root(miner) for miner in self.miners)

    def proof(self, index: int) -> list[bytes]:
        """The positional proof of leaf `index` in the results sum tree."""
        return self.results.proof(index)

    def served_proofs(self, index: int) -> list[list[bytes]]:
        """For each entry of leaf `index`'s pipeline, the proof of the leaf in that miner's served tree (empty
        for a name that is not an assigned miner)."""
        proofs = []
        for miner in self.leaves[index].pipeline:
            served = self._served.get(miner)
            proofs.append(served[0].proof(served[1][index]) if served else [])
        return proofs


def served_tree(hashes_by_index: Mapping[int, bytes]) -> MerkleTree | None:
    """A miner's served tree: sorted-pair, over the hashes of the leaves it served in request order; None if
    it served none. The coordinator builds it for every miner, and each miner for itself before it signs."""
    return MerkleTree([hashes_by_index[i] for i in sorted(hashes_by_index)]) if hashes_by_index else None


PROOF_KEY = "x_batchmarket"  # our extension field on each output line; everything else is OpenAI's


def output_line_id(task_id: int, index: int) -> str:
    """The `id` of a result line (and the `request_id` of its response): fixed by the task and line, so
    every miner of the pipeline can rebuild the exact line it signs."""
    return f"batch_req_{task_id}_{index}"


def output_hash(line: dict[str, Any]) -> bytes:
    """keccak256 of an output (or error) line in canonical JSON, without our proof field."""
    from client_sdk.inputs import canonical_json

    return bytes(keccak(canonical_json({k: v for k, v in line.items() if k != PROOF_KEY})))
