// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {ResultLeaf} from "../../src/libraries/ResultLeaf.sol";

/// @title ResultTree
/// @notice Test-side builder for results Merkle trees, written independently of the contracts: leaves are
/// double-hashed like `ResultLeaf.hash`, inner nodes hash the sorted pair (OpenZeppelin's commutative keccak), and
/// a node without a sibling is carried up unchanged.
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

    function hashPair(bytes32 a, bytes32 b) internal pure returns (bytes32) {
        return a < b ? keccak256(abi.encode(a, b)) : keccak256(abi.encode(b, a));
    }

    /// @notice Root of the tree over `hashes` (at least one).
    function root(bytes32[] memory hashes) internal pure returns (bytes32) {
        require(hashes.length > 0, "ResultTree: empty");
        bytes32[] memory level = _copy(hashes);
        uint256 n = level.length;
        while (n > 1) {
            n = _up(level, n);
        }
        return level[0];
    }

    /// @notice Proof that `hashes[index]` is in the tree.
    function proof(bytes32[] memory hashes, uint256 index) internal pure returns (bytes32[] memory path) {
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

    /// @dev Replaces the first `n` nodes of `level` by their parents in place; returns the parents' count.
    function _up(bytes32[] memory level, uint256 n) private pure returns (uint256 m) {
        m = (n + 1) / 2;
        for (uint256 i = 0; i < n / 2; ++i) {
            level[i] = hashPair(level[2 * i], level[2 * i + 1]);
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
