// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @title PositionalMerkle
/// @notice Proofs in a positional Merkle sum tree: they bind a leaf to its position in a tree of a known number of
/// leaves and yield the token usage the whole tree adds up to.
/// @dev Every node has a hash and a usage: input and output token counts, packed as one word
/// `inputTokens << 64 | outputTokens`. A leaf's usage is its own counts (which its hash also binds). An inner
/// node hashes its children's hashes and usages, left first: `keccak256(left ++ leftUsage ++ right ++
/// rightUsage)`, and its usage is their sum. So a node's usage is never claimed, only summed: every valid proof
/// of any leaf yields the same total, the sum of all the leaves' counts. A level with an odd number of nodes
/// carries its last node up unchanged. Given the leaf count, the position fixes at every level whether the
/// sibling is on the left, on the right or absent, so a proof verifies for one position only, and no position at
/// or beyond the count verifies at all. A proof holds two words per sibling: its hash, then its usage. Leaves
/// must be hashed differently from inner nodes (the results tree double-hashes them) so that no inner node can
/// pose as a leaf.
library PositionalMerkle {
    uint256 private constant COUNT_MASK = type(uint64).max;

    /// @notice The root that `leaf` with usage (`inputTokens`, `outputTokens`) at `index` of a tree of `count`
    /// leaves and `proof` imply, with the tree's total usage; all zero when the index is out of range, the proof
    /// has the wrong number of words, a usage word is malformed or a total overflows 64 bits.
    function rootOf(
        bytes32[] calldata proof,
        bytes32 leaf,
        uint64 inputTokens,
        uint64 outputTokens,
        uint256 index,
        uint256 count
    ) internal pure returns (bytes32 node, uint64 totalInput, uint64 totalOutput) {
        if (index >= count) return (0, 0, 0);
        node = leaf;
        uint256 usage = uint256(inputTokens) << 64 | outputTokens;
        uint256 used;
        for (uint256 width = count; width > 1; width = (width + 1) / 2) {
            bool isRight = index % 2 == 1;
            if (isRight || index + 1 < width) {
                if (used + 2 > proof.length) return (0, 0, 0);
                bytes32 sibling = proof[used];
                uint256 siblingUsage = uint256(proof[used + 1]);
                used += 2;
                if (siblingUsage >> 128 != 0) return (0, 0, 0);
                node = isRight
                    ? _hash(sibling, siblingUsage, node, usage)
                    : _hash(node, usage, sibling, siblingUsage);
                uint256 input = (usage >> 64) + (siblingUsage >> 64);
                uint256 output = (usage & COUNT_MASK) + (siblingUsage & COUNT_MASK);
                if (input > COUNT_MASK || output > COUNT_MASK) return (0, 0, 0);
                usage = input << 64 | output;
            }
            index /= 2;
        }
        if (used != proof.length) return (0, 0, 0);
        totalInput = uint64(usage >> 64);
        totalOutput = uint64(usage & COUNT_MASK);
    }

    function _hash(bytes32 left, uint256 leftUsage, bytes32 right, uint256 rightUsage)
        private
        pure
        returns (bytes32 result)
    {
        // Scratch space past the free memory pointer, which is left where it is.
        assembly ("memory-safe") {
            let p := mload(0x40)
            mstore(p, left)
            mstore(add(p, 0x20), leftUsage)
            mstore(add(p, 0x40), right)
            mstore(add(p, 0x60), rightUsage)
            result := keccak256(p, 0x80)
        }
    }
}
