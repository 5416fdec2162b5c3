// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {IRandomness} from "./interfaces/IRandomness.sol";
import {BlockHeader} from "./libraries/BlockHeader.sol";

/// @title BlockRandomness
/// @notice `block.prevrandao` of past blocks, proven from their headers: anyone sends a recent block's header
/// (one of the last 256, whose hash the EVM still returns); if it hashes to that block's hash, its mix hash is kept
/// as the block's random value for good. Unlike a block hash, which the block's builder can change for free (one
/// try per header it hashes), the mix hash of a block is fixed by the RANDAO reveals before it: its proposer can
/// only withhold its own block, losing its reward, to swap the value for another unknown one.
/// @dev No owner, no state but the proven values.
contract BlockRandomness is IRandomness {
    /// @notice Blocks whose hash the EVM still returns: a value must be proven within them.
    uint256 public constant BLOCKHASH_WINDOW = 256;
    /// @notice The longest header taken (today's are about 600 bytes).
    uint256 public constant MAX_HEADER_BYTES = 2048;

    mapping(uint256 blockNumber => bytes32) private _values;

    error HeaderTooLong(uint256 length, uint256 maximum);
    error HeaderUnavailable(uint256 blockNumber);
    error HeaderMismatch(uint256 blockNumber, bytes32 blockHash, bytes32 headerHash);
    error NoRandomness(uint256 blockNumber);

    event RandomnessProven(uint256 indexed blockNumber, bytes32 value);

    /// @notice Proves block `blockNumber`'s random value from its RLP-encoded header; returns it. Anyone, once
    /// the block exists and while its hash is still known; proving it again changes nothing.
    function prove(uint256 blockNumber, bytes calldata header) external returns (bytes32 value) {
        value = _values[blockNumber];
        if (value != 0) return value;
        if (header.length > MAX_HEADER_BYTES) revert HeaderTooLong(header.length, MAX_HEADER_BYTES);
        bytes32 blockHash = blockhash(blockNumber);
        if (blockHash == 0) revert HeaderUnavailable(blockNumber);
        bytes32 headerHash = keccak256(header);
        if (headerHash != blockHash) revert HeaderMismatch(blockNumber, blockHash, headerHash);
        value = BlockHeader.mixHashOf(header);
        // A chain without RANDAO (before the merge, or a devnet that leaves it empty) has nothing to give.
        if (value == 0) revert NoRandomness(blockNumber);
        _values[blockNumber] = value;
        emit RandomnessProven(blockNumber, value);
    }

    /// @inheritdoc IRandomness
    function valueOf(uint256 blockNumber) external view returns (bytes32) {
        return _values[blockNumber];
    }

    /// @inheritdoc IRandomness
    function isExpired(uint256 blockNumber) external view returns (bool) {
        return _values[blockNumber] == 0 && block.number > blockNumber + BLOCKHASH_WINDOW;
    }
}
