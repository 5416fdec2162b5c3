// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @title ResultLeaf
/// @notice One leaf of a task's results Merkle tree: a single request's result, bound to the task, its input,
/// its output, its token counts and the pipeline of miners that produced it.
/// @dev Leaves are double-hashed (keccak(keccak(abi.encode(...)))) so that no 64-byte inner node can pass as a
/// leaf, as OpenZeppelin's MerkleProof recommends. The Python SDK builds the same bytes.
library ResultLeaf {
    struct Leaf {
        uint256 taskId;
        uint32 requestIndex;
        bytes32 customIdHash; // keccak256 of the request's custom_id
        bytes32 inputHash; // keccak256 of the canonical request line
        bytes32 outputHash; // keccak256 of the canonical result body
        uint32 inputTokens;
        uint32 outputTokens;
        address[] pipeline; // miners that served this request, first stage first
    }

    /// @notice The leaf hash that appears in the results tree.
    function hash(Leaf calldata leaf) internal pure returns (bytes32) {
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
}
