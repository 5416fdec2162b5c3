// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

// Blocks between the one a random draw is asked for in and the block whose randomness seeds it. The proposers of
// these blocks reveal their RANDAO shares one after another, so to know the seed when the draw is asked for, one
// party must propose all of them; to change it afterwards, it must withhold a block (and lose its reward), which
// only swaps one unknown value for another.
uint256 constant SEED_DELAY_BLOCKS = 4;

/// @title IRandomness
/// @notice Where jury and audit draws take their seeds: the random value of a given block, which nobody could
/// choose. The deployment's implementation proves `block.prevrandao` of a past block from its header
/// (`BlockRandomness`); a deployment may point at another, such as a VRF oracle's, behind the same calls.
interface IRandomness {
    /// @notice The random value of block `blockNumber`; 0 while it is not known (yet, or ever: see `isExpired`).
    function valueOf(uint256 blockNumber) external view returns (bytes32);
    /// @notice Whether block `blockNumber`'s value can no longer become known (it was never proven in time).
    function isExpired(uint256 blockNumber) external view returns (bool);
}
