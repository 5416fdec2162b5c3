// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @title PositionalMerkle
/// @notice Merkle proofs that bind a leaf to its position in a tree of a known number of leaves.
/// @dev Inner nodes hash the ordered pair, left first: `keccak256(left ++ right)`. A level with an odd number of
/// nodes carries its last node up unchanged. Given the leaf count, the position fixes at every level whether the
/// sibling is on the left, on the right or absent, so a proof verifies for one position only, and no position at
/// or beyond the count verifies at all. Leaves must be hashed differently from inner nodes (the results tree
/// double-hashes them) so that no inner node can pose as a leaf.
library PositionalMerkle {
    /// @notice The root that `leaf` at `index` of a tree of `count` leaves and `proof` imply, or zero when the
    /// index is out of range or the proof has the wrong number of siblings.
    function rootOf(bytes32[] calldata proof, bytes32 leaf, uint256 index, uint256 count)
        internal
        pure
        returns (bytes32 node)
    {
        if (index >= count) return bytes32(0);
        node = leaf;
        uint256 used;
        for (uint256 width = count; width > 1; width = (width + 1) / 2) {
            if (index % 2 == 1) {
                if (used == proof.length) return bytes32(0);
                node = _hash(proof[used++], node);
            } else if (index + 1 < width) {
                if (used == proof.length) return bytes32(0);
                node = _hash(node, proof[used++]);
            }
            index /= 2;
        }
        if (used != proof.length) return bytes32(0);
    }

    function _hash(bytes32 left, bytes32 right) private pure returns (bytes32 result) {
        assembly ("memory-safe") {
            mstore(0x00, left)
            mstore(0x20, right)
            result := keccak256(0x00, 0x40)
        }
    }
}
