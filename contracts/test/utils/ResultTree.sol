// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {ResultLeaf} from "../../src/libraries/ResultLeaf.sol";

/// @title ResultTree
/// @notice Test-side builder for results Merkle trees, written independently of the contracts: leaves are
/// double-hashed like `ResultLeaf.hash`; inner nodes hash the ordered pair in the positional results tree and the
/// sorted pair (OpenZeppelin's commutative keccak) in a miner's served tree; a node without a sibling is carried up
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

    /// @notice The ordered pair hash, left first: the positional results tree.
    function hashOrdered(bytes32 left, bytes32 right) internal pure returns (bytes32) {
        return keccak256(abi.encode(left, right));
    }

    /// @notice Root of the positional results tree over `hashes` (at least one).
    function root(bytes32[] memory hashes) internal pure returns (bytes32) {
        return _root(hashes, false);
    }

    /// @notice Proof that `hashes[index]` is at position `index` of the results tree.
    function proof(bytes32[] memory hashes, uint256 index) internal pure returns (bytes32[] memory) {
        return _proof(hashes, index, false);
    }

    /// @notice Root of the sorted-pair tree over `hashes` (at least one), as a miner's served root is built.
    function sortedRoot(bytes32[] memory hashes) internal pure returns (bytes32) {
        return _root(hashes, true);
    }

    /// @notice Proof that `hashes[index]` is in the sorted-pair tree (OpenZeppelin's MerkleProof checks it).
    function sortedProof(bytes32[] memory hashes, uint256 index) internal pure returns (bytes32[] memory) {
        return _proof(hashes, index, true);
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

    function _root(bytes32[] memory hashes, bool sorted) private pure returns (bytes32) {
        require(hashes.length > 0, "ResultTree: empty");
        bytes32[] memory level = _copy(hashes);
        uint256 n = level.length;
        while (n > 1) {
            n = _up(level, n, sorted);
        }
        return level[0];
    }

    function _proof(bytes32[] memory hashes, uint256 index, bool sorted)
        private
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
            n = _up(level, n, sorted);
            index /= 2;
        }
        assembly ("memory-safe") {
            mstore(path, length)
        }
    }

    /// @dev Replaces the first `n` nodes of `level` by their parents in place; returns the parents' count.
    function _up(bytes32[] memory level, uint256 n, bool sorted) private pure returns (uint256 m) {
        m = (n + 1) / 2;
        for (uint256 i = 0; i < n / 2; ++i) {
            (bytes32 a, bytes32 b) = (level[2 * i], level[2 * i + 1]);
            level[i] = sorted ? hashSorted(a, b) : hashOrdered(a, b);
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
