// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {Checkpoints} from "@openzeppelin/contracts/utils/structs/Checkpoints.sol";

/// @title Sortition
/// @notice Stake-weighted random selection over entries whose weight can be removed, read as of any past block.
/// Entry i owns the range `[start_i, start_i + weight_i)` of draw numbers, where `start_i` is the weight of the
/// entries before it; a uniform number below the total selects an entry with probability proportional to its
/// weight. A Fenwick tree over the entries keeps the prefix sums, and every node keeps its history (a checkpoint
/// per block it changed in), so a draw reads the pool exactly as it stood at the end of a given block: weight
/// added or removed later (a registration, an exit after the seed is known) changes no earlier draw.
/// @dev Lookups and updates touch one node per level: CAPACITY_LOG2 of them. Checkpoints are keyed by block.
library Sortition {
    using Checkpoints for Checkpoints.Trace208;

    /// @notice Most entries a pool holds (2^16).
    uint256 internal constant CAPACITY_LOG2 = 16;
    uint256 internal constant CAPACITY = 1 << CAPACITY_LOG2;

    struct Pool {
        address[] accounts;
        // Fenwick node p (1..CAPACITY) sums the weights of entries (p - lowbit(p), p]; entry i sits at p = i + 1.
        mapping(uint256 node => Checkpoints.Trace208) nodes;
        mapping(uint256 index => Checkpoints.Trace208) weights;
    }

    error ZeroWeight();
    error PoolFull(uint256 capacity);
    error DrawOutOfRange(uint256 number, uint256 total);

    /// @notice Adds an entry of `weight` for `account` from this block on; returns its index.
    function append(Pool storage pool, address account, uint256 weight) internal returns (uint256 index) {
        if (weight == 0) revert ZeroWeight();
        index = pool.accounts.length;
        if (index == CAPACITY) revert PoolFull(CAPACITY);
        pool.accounts.push(account);
        reweigh(pool, index, weight);
    }

    /// @notice Removes entry `index`'s weight from this block on (no-op if it has none).
    function remove(Pool storage pool, uint256 index) internal {
        reweigh(pool, index, 0);
    }

    /// @notice The weight of every entry at the end of block `blockNumber` (the current one: as it is now).
    function totalAt(Pool storage pool, uint256 blockNumber) internal view returns (uint256) {
        return pool.nodes[CAPACITY].upperLookupRecent(uint48(blockNumber));
    }

    /// @notice Entry `index`'s range at the end of block `blockNumber`: where it starts and its weight.
    function rangeAt(Pool storage pool, uint256 index, uint256 blockNumber)
        internal
        view
        returns (uint256 start, uint256 weight)
    {
        uint48 key = uint48(blockNumber);
        for (uint256 node = index; node > 0; node -= node & (~node + 1)) {
            start += pool.nodes[node].upperLookupRecent(key);
        }
        weight = weightAt(pool, index, blockNumber);
    }

    /// @notice Entry `index`'s weight at the end of block `blockNumber`.
    function weightAt(Pool storage pool, uint256 index, uint256 blockNumber) internal view returns (uint256) {
        return pool.weights[index].upperLookupRecent(uint48(blockNumber));
    }

    /// @notice The entry whose range at the end of block `blockNumber` holds `number` (below `totalAt` then).
    function select(Pool storage pool, uint256 number, uint256 blockNumber)
        internal
        view
        returns (uint256 index)
    {
        uint256 total = totalAt(pool, blockNumber);
        if (number >= total) revert DrawOutOfRange(number, total);
        uint48 key = uint48(blockNumber);
        uint256 position;
        for (uint256 step = CAPACITY; step > 0; step >>= 1) {
            uint256 next = position + step;
            if (next > CAPACITY) continue;
            uint256 sum = pool.nodes[next].upperLookupRecent(key);
            if (sum <= number) {
                number -= sum;
                position = next;
            }
        }
        return position; // the first position whose prefix sum exceeds `number`, less one: a 0-based index
    }

    /// @notice Sets entry `index`'s weight to `weight` from this block on, updating the nodes above it (an entry
    /// removed earlier takes weight again in its own place).
    function reweigh(Pool storage pool, uint256 index, uint256 weight) internal {
        uint48 key = uint48(block.number);
        uint256 old = pool.weights[index].latest();
        if (old == weight) return;
        pool.weights[index].push(key, uint208(weight));
        for (uint256 node = index + 1; node <= CAPACITY; node += node & (~node + 1)) {
            uint256 value = pool.nodes[node].latest();
            pool.nodes[node].push(
                key, uint208(weight > old ? value + (weight - old) : value - (old - weight))
            );
        }
    }
}
