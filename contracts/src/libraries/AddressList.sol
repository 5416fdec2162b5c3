// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @title AddressList
/// @notice Membership in a short list of addresses (a task's miners, a dispute's parties: a few dozen at most).
library AddressList {
    /// @notice Whether `item` is in `list`; a linear scan, as the lists it serves are bounded and short.
    function contains(address[] memory list, address item) internal pure returns (bool) {
        for (uint256 i = 0; i < list.length; ++i) {
            if (list[i] == item) return true;
        }
        return false;
    }
}
