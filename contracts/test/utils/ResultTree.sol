// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {ResultLeaf} from "../../src/libraries/ResultLeaf.sol";

/// @title ResultTree
/// @notice Test-side builder for results Merkle trees, written independently of the contracts: leaves are
/// double-hashed like `ResultLeaf.hash`; inner nodes of the positional results sum tree hash their children's
/// hashes and usage words (input tokens << 64 | output tokens) left first and add up their usage, and a miner's
/// served tree hashes the sorted pair (OpenZeppelin's commutative keccak); a node without a sibling is carried up
/// unchanged.
library ResultTree {
    /// @notice The hash of `leaf` as it appears in a results tree.
    function hashLeaf(ResultLeaf.Leaf memory leaf) internal pure returns (bytes32) {
        return keccak256(
            bytes.concat(
                keccak256(
                    abi.encode(
                        leaf.taskId,
                        leaf.requestIndex,
                        leaf.customIdHash,
                        leaf.inputHash,
                        leaf.outputHash,
                        leaf.inputTokens,
                        leaf.outputTokens,
                        leaf.pipeline
                    )
                )
            )
        );
    }

    function hashLeaves(ResultLeaf.Leaf[] memory leaves) internal pure returns (bytes32[] memory hashes) {
        hashes = new bytes32[](leaves.length);
        for (uint256 i = 0; i < leaves.length; ++i) {
            hashes[i] = hashLeaf(leaves[i]);
        }
    }

    /// @notice OpenZeppelin's commutative pair hash: the trees of leaves a miner served.
    function hashSorted(bytes32 a, bytes32 b) internal pure returns (bytes32) {
        return a < b ? keccak256(abi.encode(a, b)) : keccak256(abi.encode(b, a));
    }

    /// @notice A node's usage word: input tokens in the high 64 of 128 bits, output tokens in the low 64.
    function usageWord(uint256 inputTokens, uint256 outputTokens) internal pure returns (uint256) {
        return inputTokens * 2 ** 64 + outputTokens;
    }

    /// @notice An inner node of the results sum tree: its children's hashes and usage words, left first.
    function hashNode(bytes32 left, uint256 leftUsage, bytes32 right, uint256 rightUsage)
        internal
        pure
        returns (bytes32)
    {
        return keccak256(abi.encode(left, leftUsage, right, rightUsage));
    }

    /// @notice Total input and output tokens over `leaves`.
    function usage(ResultLeaf.Leaf[] memory leaves)
        internal
        pure
        returns (uint64 inputTokens, uint64 outputTokens)
    {
        for (uint256 i = 0; i < leaves.length; ++i) {
            inputTokens += leaves[i].inputTokens;
            outputTokens += leaves[i].outputTokens;
        }
    }

    /// @notice Root of the positional results sum tree over `leaves` (at least one).
    function root(ResultLeaf.Leaf[] memory leaves) internal pure returns (bytes32) {
        (bytes32[] memory hashes, uint256[] memory usages) = _sumLevel(leaves);
        uint256 n = hashes.length;
        while (n > 1) {
            n = _sumUp(hashes, usages, n);
        }
        return hashes[0];
    }

    /// @notice Proof that `leaves[index]` is at position `index` of the results sum tree: per level with a
    /// sibling, its hash then its usage word.
    function proof(ResultLeaf.Leaf[] memory leaves, uint256 index)
        internal
        pure
        returns (bytes32[] memory path)
    {
        require(index < leaves.length, "ResultTree: index");
        (bytes32[] memory hashes, uint256[] memory usages) = _sumLevel(leaves);
        path = new bytes32[](256);
        uint256 length;
        uint256 n = hashes.length;
        while (n > 1) {
            uint256 sibling = index ^ 1;
            if (sibling < n) {
                path[length++] = hashes[sibling];
                path[length++] = bytes32(usages[sibling]);
            }
            n = _sumUp(hashes, usages, n);
            index /= 2;
        }
        assembly ("memory-safe") {
            mstore(path, length)
        }
    }

    /// @notice Root of the sorted-pair tree over `hashes` (at least one), as a miner's served root is built.
    function sortedRoot(bytes32[] memory hashes) internal pure returns (bytes32) {
        require(hashes.length > 0, "ResultTree: empty");
        bytes32[] memory level = _copy(hashes);
        uint256 n = level.length;
        while (n > 1) {
            n = _up(level, n);
        }
        return level[0];
    }

    /// @notice Proof that `hashes[index]` is in the sorted-pair tree (OpenZeppelin's MerkleProof checks it).
    function sortedProof(bytes32[] memory hashes, uint256 index)
        internal
        pure
        returns (bytes32[] memory path)
    {
        require(index < hashes.length, "ResultTree: index");
        bytes32[] memory level = _copy(hashes);
        path = new bytes32[](256);
        uint256 length;
        uint256 n = level.length;
        while (n > 1) {
            uint256 sibling = index ^ 1;
            if (sibling < n) path[length++] = level[sibling];
            n = _up(level, n);
            index /= 2;
        }
        assembly ("memory-safe") {
            mstore(path, length)
        }
    }

    /// @notice The hashes of the leaves whose pipeline names `miner`, in request order.
    function servedHashes(ResultLeaf.Leaf[] memory leaves, address miner)
        internal
        pure
        returns (bytes32[] memory hashes)
    {
        hashes = new bytes32[](leaves.length);
        uint256 count;
        for (uint256 i = 0; i < leaves.length; ++i) {
            if (_in(leaves[i].pipeline, miner)) hashes[count++] = hashLeaf(leaves[i]);
        }
        assembly ("memory-safe") {
            mstore(hashes, count)
        }
    }

    /// @notice Each of `assigned`'s served root over `leaves` (zero for a miner that served none).
    function servedRoots(ResultLeaf.Leaf[] memory leaves, address[] memory assigned)
        internal
        pure
        returns (bytes32[] memory roots)
    {
        roots = new bytes32[](assigned.length);
        for (uint256 i = 0; i < assigned.length; ++i) {
            bytes32[] memory hashes = servedHashes(leaves, assigned[i]);
            if (hashes.length > 0) roots[i] = sortedRoot(hashes);
        }
    }

    /// @notice For each miner of `leaves[index]`'s pipeline, the proof of that leaf in its served tree.
    function servedProofs(ResultLeaf.Leaf[] memory leaves, uint256 index)
        internal
        pure
        returns (bytes32[][] memory proofs)
    {
        address[] memory pipeline = leaves[index].pipeline;
        bytes32 leafHash = hashLeaf(leaves[index]);
        proofs = new bytes32[][](pipeline.length);
        for (uint256 k = 0; k < pipeline.length; ++k) {
            bytes32[] memory hashes = servedHashes(leaves, pipeline[k]);
            for (uint256 j = 0; j < hashes.length; ++j) {
                if (hashes[j] == leafHash) proofs[k] = sortedProof(hashes, j);
            }
        }
    }

    function _in(address[] memory list, address item) private pure returns (bool) {
        for (uint256 i = 0; i < list.length; ++i) {
            if (list[i] == item) return true;
        }
        return false;
    }

    function _sumLevel(ResultLeaf.Leaf[] memory leaves)
        private
        pure
        returns (bytes32[] memory hashes, uint256[] memory usages)
    {
        require(leaves.length > 0, "ResultTree: empty");
        hashes = hashLeaves(leaves);
        usages = new uint256[](leaves.length);
        for (uint256 i = 0; i < leaves.length; ++i) {
            usages[i] = usageWord(leaves[i].inputTokens, leaves[i].outputTokens);
        }
    }

    /// @dev Replaces the first `n` nodes of the sum tree level by their parents in place; returns their count.
    function _sumUp(bytes32[] memory hashes, uint256[] memory usages, uint256 n)
        private
        pure
        returns (uint256 m)
    {
        m = (n + 1) / 2;
        for (uint256 i = 0; i < n / 2; ++i) {
            (uint256 a, uint256 b) = (usages[2 * i], usages[2 * i + 1]);
            hashes[i] = hashNode(hashes[2 * i], a, hashes[2 * i + 1], b);
            usages[i] = usageWord(a / 2 ** 64 + b / 2 ** 64, a % 2 ** 64 + b % 2 ** 64);
        }
        if (n % 2 == 1) (hashes[m - 1], usages[m - 1]) = (hashes[n - 1], usages[n - 1]);
    }

    /// @dev Replaces the first `n` nodes of a sorted-pair level by their parents in place; returns their count.
    function _up(bytes32[] memory level, uint256 n) private pure returns (uint256 m) {
        m = (n + 1) / 2;
        for (uint256 i = 0; i < n / 2; ++i) {
            level[i] = hashSorted(level[2 * i], level[2 * i + 1]);
        }
        if (n % 2 == 1) level[m - 1] = level[n - 1];
    }

    function _copy(bytes32[] memory a) private pure returns (bytes32[] memory b) {
        b = new bytes32[](a.length);
        for (uint256 i = 0; i < a.length; ++i) {
            b[i] = a[i];
        }
    }
}
