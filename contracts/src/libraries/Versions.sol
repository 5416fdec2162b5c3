// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @title Versions
/// @notice Which of a list of settings was in force at a time: `since[i]` is when version i took effect, in
/// increasing order, the first at 0 (always in force).
library Versions {
    /// @notice The latest version whose start is at or before `time` (a binary search over `since`).
    function at(uint64[] storage since, uint256 time) internal view returns (uint256 index) {
        uint256 high = since.length - 1;
        while (index < high) {
            uint256 mid = (index + high + 1) / 2;
            if (since[mid] <= time) index = mid;
            else high = mid - 1;
        }
    }
}
