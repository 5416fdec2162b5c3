// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @title Sortition
/// @notice Stake-weighted random selection over an append-only list of weighted entries. Entry i owns the range
/// `[end[i-1], end[i])` of draw numbers, so a uniform number in `[0, total)` selects an account with probability
/// proportional to its weight. The list only grows: a draw bounded by the total at some earlier moment can only
/// land on entries that existed then, so a dispute fixes its candidate set when it opens, and no one can steer it
/// by joining after the random seed is known. Splitting stake over many addresses buys no extra weight.
/// @dev Lookup is a binary search: O(log n) storage reads, whatever the number of entries.
library Sortition {
    struct Pool {
        address[] accounts;
        uint256[] ends; // cumulative weight, strictly increasing
    }

    error ZeroWeight();
    error DrawOutOfRange(uint256 number, uint256 bound);

    /// @notice Adds `weight` units of selection weight for `account`; returns the entry's index.
    function append(Pool storage pool, address account, uint256 weight) internal returns (uint256 index) {
        if (weight == 0) revert ZeroWeight();
        index = pool.ends.length;
        pool.ends.push(total(pool) + weight);
        pool.accounts.push(account);
    }

    /// @notice Entry `index`'s range: where it starts and its weight.
    function range(Pool storage pool, uint256 index) internal view returns (uint256 start, uint256 weight) {
        start = index == 0 ? 0 : pool.ends[index - 1];
        weight = pool.ends[index] - start;
    }

    /// @notice Total weight of every entry so far.
    function total(Pool storage pool) internal view returns (uint256) {
        uint256 n = pool.ends.length;
        return n == 0 ? 0 : pool.ends[n - 1];
    }

    /// @notice The entry whose range holds `number`: its account and its weight; `number` must be below `bound`,
    /// a total the pool had.
    function select(Pool storage pool, uint256 number, uint256 bound)
        internal
        view
        returns (address account, uint256 weight)
    {
        if (number >= bound || bound > total(pool)) revert DrawOutOfRange(number, bound);
        uint256 low = 0;
        uint256 high = pool.ends.length - 1;
        while (low < high) {
            uint256 mid = (low + high) / 2;
            if (pool.ends[mid] > number) high = mid;
            else low = mid + 1;
        }
        (, uint256 entryWeight) = range(pool, low);
        return (pool.accounts[low], entryWeight);
    }
}
