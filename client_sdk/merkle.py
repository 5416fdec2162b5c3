"""Merkle trees of two kinds, both checked on-chain:

- sorted-pair (OpenZeppelin's MerkleProof, commutative keccak256): the input tree and each miner's served
  tree, where a leaf carries its own index and order does not matter;
- positional sum tree (contracts/src/libraries/PositionalMerkle.sol): the results tree, where a proof places a
  leaf at one position of a tree of a known number of leaves and yields the token usage the whole tree adds
  up to. Each node has a usage (input and output tokens, packed as the word `input << 64 | output`); an inner
  node hashes its children's hashes and usage words, left first, and its usage is their sum, so every valid
  proof of any leaf yields the same totals. A proof holds two words per sibling: its hash, then its usage.

Leaves are given already hashed (see `results.ResultLeaf.hash`, which double-hashes). A level with an odd
number of nodes promotes its last node unchanged, so every leaf count from 1 up works.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

import sha3


def keccak256(data: bytes) -> bytes:
    """Ethereum's keccak256, from a C extension called directly: eth_utils' wrapper and pycryptodome's
    ctypes object each cost more than the hash on 32-64 bytes, and a 50,000-line batch hashes about 250,000
    of them."""
    digest: bytes = sha3.keccak_256(data).digest()
    return digest


def hash_pair(a: bytes, b: bytes) -> bytes:
    """OpenZeppelin's commutative keccak256: the smaller word first."""
    return keccak256(a + b if a < b else b + a)


Node = TypeVar("Node")
COUNT_LIMIT = 2**64  # each token count, and each total, is a uint64 on-chain


@dataclass(frozen=True)
class Usage:
    """Input and output tokens: of one leaf, or summed over a subtree."""

    input_tokens: int
    output_tokens: int

    def word(self) -> bytes:
        """The 32-byte usage word hashed into inner nodes and carried in proofs."""
        return (self.input_tokens << 64 | self.output_tokens).to_bytes(32, "big")

    @classmethod
    def from_word(cls, word: bytes) -> Usage | None:
        """The usage a word holds, or None if it sets bits above the two 64-bit counts."""
        value = int.from_bytes(word, "big")
        if len(word) != 32 or value >> 128:
            return None
        return cls(value >> 64, value & (COUNT_LIMIT - 1))

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.input_tokens + other.input_tokens, self.output_tokens + other.output_tokens)

    def fits(self) -> bool:
        return self.input_tokens < COUNT_LIMIT and self.output_tokens < COUNT_LIMIT


def hash_node(left: bytes, left_usage: Usage, right: bytes, right_usage: Usage) -> bytes:
    """The results sum tree's inner node: keccak256 of the children's hashes and usage words, left first."""
    return keccak256(left + left_usage.word() + right + right_usage.word())


class MerkleTree:
    """A sorted-pair tree over leaf hashes in the given order; `proof(i)` proves leaf i against `root`."""

    def __init__(self, leaves: Sequence[bytes]) -> None:
        _check_hashes(leaves)
        self.levels: list[list[bytes]] = [list(leaves)]
        while len(self.levels[-1]) > 1:
            level = self.levels[-1]
            parents = [hash_pair(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
            if len(level) % 2:
                parents.append(level[-1])
            self.levels.append(parents)

    @property
    def root(self) -> bytes:
        return self.levels[-1][0]

    def __len__(self) -> int:
        return len(self.levels[0])

    def proof(self, index: int) -> list[bytes]:
        """Sibling hashes from leaf `index` up to the root."""
        return _siblings(self.levels, index)


class SumTree:
    """The positional results sum tree over leaf hashes and their usages, in request order: `root` and `usage`
    are the root hash and the totals; `proof(i)` proves leaf i at its position (two words per sibling)."""

    def __init__(self, leaves: Sequence[bytes], usages: Sequence[Usage]) -> None:
        _check_hashes(leaves)
        if len(usages) != len(leaves):
            raise ValueError("a sum tree needs one usage per leaf")
        if not all(u.fits() and min(u.input_tokens, u.output_tokens) >= 0 for u in usages):
            raise ValueError("token counts must be uint64")
        self.levels: list[list[tuple[bytes, Usage]]] = [list(zip(leaves, usages, strict=True))]
        while len(self.levels[-1]) > 1:
            level = self.levels[-1]
            parents = []
            for (left, lu), (right, ru) in zip(level[0:-1:2], level[1::2], strict=True):
                total = lu + ru
                if not total.fits():
                    raise ValueError("the tree's token totals overflow uint64")
                parents.append((hash_node(left, lu, right, ru), total))
            if len(level) % 2:
                parents.append(level[-1])
            self.levels.append(parents)

    @property
    def root(self) -> bytes:
        return self.levels[-1][0][0]

    @property
    def usage(self) -> Usage:
        return self.levels[-1][0][1]

    def __len__(self) -> int:
        return len(self.levels[0])

    def proof(self, index: int) -> list[bytes]:
        """Per level with a sibling, its hash then its usage word, from leaf `index` up to the root."""
        return [word for node, usage in _siblings(self.levels, index) for word in (node, usage.word())]


def _siblings(levels: Sequence[Sequence[Node]], index: int) -> list[Node]:
    """The sibling of leaf `index`'s path on each level that has one, from the leaves up."""
    if not 0 <= index < len(levels[0]):
        raise IndexError(f"leaf {index} is outside a tree of {len(levels[0])} leaves")
    found = []
    for level in levels[:-1]:
        sibling = index ^ 1
        if sibling < len(level):
            found.append(level[sibling])
        index //= 2
    return found


def _check_hashes(leaves: Sequence[bytes]) -> None:
    if not leaves:
        raise ValueError("a Merkle tree needs at least one leaf")
    if any(len(leaf) != 32 for leaf in leaves):
        raise ValueError("leaves must be 32-byte hashes")


def verify(proof: Sequence[bytes], root: bytes, leaf: bytes) -> bool:
    """What MerkleProof.verify computes on-chain."""
    node = leaf
    for sibling in proof:
        node = hash_pair(node, sibling)
    return node == root


def root_at(
    proof: Sequence[bytes], leaf: bytes, usage: Usage, index: int, count: int
) -> tuple[bytes, Usage] | None:
    """What PositionalMerkle.rootOf computes on-chain: the root and total usage implied by `leaf` with `usage`
    at `index` of a results sum tree of `count` leaves, or None when the index is out of range, the proof has
    the wrong number of words, a usage word is malformed or a total overflows."""
    if not 0 <= index < count or len(proof) % 2:
        return None
    node, used, width = leaf, 0, count
    while width > 1:
        if index % 2 == 1 or index + 1 < width:
            if used == len(proof):
                return None
            sibling, sibling_usage = proof[used], Usage.from_word(proof[used + 1])
            used += 2
            if sibling_usage is None:
                return None
            if index % 2 == 1:
                node = hash_node(sibling, sibling_usage, node, usage)
            else:
                node = hash_node(node, usage, sibling, sibling_usage)
            usage = usage + sibling_usage
            if not usage.fits():
                return None
        index //= 2
        width = (width + 1) // 2
    return (node, usage) if used == len(proof) else None
