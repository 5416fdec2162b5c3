"""Merkle trees compatible with OpenZeppelin's MerkleProof: sorted-pair keccak256 hashing.

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


class MerkleTree:
    """A tree over leaf hashes in the given order; `proof(i)` proves leaf i against `root`."""

    def __init__(self, leaves: Sequence[bytes]) -> None:
        if not leaves:
            raise ValueError("a Merkle tree needs at least one leaf")
        if any(len(leaf) != 32 for leaf in leaves):
            raise ValueError("leaves must be 32-byte hashes")
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
