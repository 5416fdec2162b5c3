"""Merkle trees of two kinds, both checked on-chain:

- sorted-pair (OpenZeppelin's MerkleProof, commutative keccak256): the input tree and each miner's served
  tree, where a leaf carries its own index and order does not matter;
- positional (contracts/src/libraries/PositionalMerkle.sol, ordered keccak256 of left then right): the results
  tree, where a proof places a leaf at one position of a tree of a known number of leaves.

Leaves are given already hashed (see `results.ResultLeaf.hash`, which double-hashes). A level with an odd
number of nodes promotes its last node unchanged, so every leaf count from 1 up works.
"""

from __future__ import annotations

from collections.abc import Sequence

from Crypto.Hash import keccak as _keccak


def keccak256(data: bytes) -> bytes:
    """Ethereum's keccak256, called directly: eth_utils' wrapper costs more than the hash on 32-64 bytes, and
    a 50,000-line batch hashes several hundred thousand of those."""
    return bytes(_keccak.new(data=data, digest_bits=256).digest())


def hash_pair(a: bytes, b: bytes) -> bytes:
    """OpenZeppelin's commutative keccak256: the smaller word first."""
    return keccak256(a + b if a < b else b + a)


def hash_ordered(left: bytes, right: bytes) -> bytes:
    """The positional tree's inner node: keccak256 of the left child then the right."""
    return keccak256(left + right)


class MerkleTree:
    """A tree over leaf hashes in the given order; `proof(i)` proves leaf i against `root`. Sorted-pair unless
    `positional`."""

    def __init__(self, leaves: Sequence[bytes], *, positional: bool = False) -> None:
        if not leaves:
            raise ValueError("a Merkle tree needs at least one leaf")
        if any(len(leaf) != 32 for leaf in leaves):
            raise ValueError("leaves must be 32-byte hashes")
        pair = hash_ordered if positional else hash_pair
        self.levels: list[list[bytes]] = [list(leaves)]
        while len(self.levels[-1]) > 1:
            level = self.levels[-1]
            parents = [pair(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
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
        if not 0 <= index < len(self):
            raise IndexError(f"leaf {index} is outside a tree of {len(self)} leaves")
        proof = []
        for level in self.levels[:-1]:
            sibling = index ^ 1
            if sibling < len(level):
                proof.append(level[sibling])
            index //= 2
        return proof


def verify(proof: Sequence[bytes], root: bytes, leaf: bytes) -> bool:
    """What MerkleProof.verify computes on-chain."""
    node = leaf
    for sibling in proof:
        node = hash_pair(node, sibling)
    return node == root


def root_at(proof: Sequence[bytes], leaf: bytes, index: int, count: int) -> bytes | None:
    """What PositionalMerkle.rootOf computes on-chain: the root implied by `leaf` at `index` of a positional
    tree of `count` leaves, or None when the index is out of range or the proof has the wrong number of
    siblings."""
    if not 0 <= index < count:
        return None
    node, used, width = leaf, 0, count
    while width > 1:
        if index % 2 == 1 or index + 1 < width:
            if used == len(proof):
                return None
            sibling = proof[used]
            used += 1
            node = hash_ordered(sibling, node) if index % 2 == 1 else hash_ordered(node, sibling)
        index //= 2
        width = (width + 1) // 2
    return node if used == len(proof) else None
