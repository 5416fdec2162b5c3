// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @title PayoutLedger
/// @notice What one dispute resolution pays, built in memory and handed to the escrow in one call.
library PayoutLedger {
    struct Ledger {
        address[] payees;
        uint256[] amounts;
        uint256 count;
        /// What the coherent jurors share: forfeited bond rewards, the slash reward and the penalties.
        uint256 jurorPot;
        /// Stake taken from incoherent or silent seats.
        uint256 penalties;
        uint256 coherentSeats;
    }

    /// @notice A ledger with room for `size` payments.
    function create(uint256 size) internal pure returns (Ledger memory ledger) {
        ledger.payees = new address[](size);
        ledger.amounts = new uint256[](size);
    }

    /// @notice Adds a payment of `amount` to `payee`; a zero amount adds nothing.
    function pay(Ledger memory ledger, address payee, uint256 amount) internal pure {
        if (amount == 0) return;
        ledger.payees[ledger.count] = payee;
        ledger.amounts[ledger.count] = amount;
        ++ledger.count;
    }

    /// @notice Shortens the ledger's arrays to the payments written.
    function trim(Ledger memory ledger) internal pure {
        address[] memory payees = ledger.payees;
        uint256[] memory amounts = ledger.amounts;
        uint256 count = ledger.count;
        assembly ("memory-safe") {
            mstore(payees, count)
            mstore(amounts, count)
        }
    }
}
