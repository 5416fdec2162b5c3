// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {Test} from "forge-std/Test.sol";
import {Sortition} from "../src/libraries/Sortition.sol";

/// @notice Exposes the library over one pool.
contract SortitionHarness {
    using Sortition for Sortition.Pool;

    Sortition.Pool internal pool;

    function append(address account, uint256 weight) external returns (uint256) {
        return pool.append(account, weight);
    }

    function remove(uint256 index) external {
        pool.remove(index);
    }

    function totalAt(uint256 blockNumber) external view returns (uint256) {
        return pool.totalAt(blockNumber);
    }

    function rangeAt(uint256 index, uint256 blockNumber) external view returns (uint256, uint256) {
        return pool.rangeAt(index, blockNumber);
    }

    function select(uint256 number, uint256 blockNumber) external view returns (uint256) {
        return pool.select(number, blockNumber);
    }
}

/// @notice The Fenwick descent agrees with a linear scan over the weights as they stood at any block: weight added
/// or removed later changes no earlier draw.
contract SortitionTest is Test {
    SortitionHarness internal harness = new SortitionHarness();

    function test_select_rangesRemovalAndErrors() public {
        vm.roll(10);
        vm.expectRevert(abi.encodeWithSelector(Sortition.DrawOutOfRange.selector, 0, 0));
        harness.select(0, 10);
        vm.expectRevert(Sortition.ZeroWeight.selector);
        harness.append(address(1), 0);
        harness.append(address(1), 2); // [0, 2)
        harness.append(address(2), 3); // [2, 5)
        harness.append(address(3), 1); // [5, 6)
        assertEq(harness.totalAt(10), 6);
        uint256[6] memory expected = [uint256(0), 0, 1, 1, 1, 2];
        for (uint256 n = 0; n < 6; ++n) {
            assertEq(harness.select(n, 10), expected[n]);
        }
        (uint256 start, uint256 weight) = harness.rangeAt(2, 10);
        assertEq(start, 5);
        assertEq(weight, 1);
        vm.expectRevert(abi.encodeWithSelector(Sortition.DrawOutOfRange.selector, 6, 6));
        harness.select(6, 10);

        vm.roll(11);
        harness.remove(1); // entry 1 leaves from block 11 on
        harness.remove(1); // again: nothing
        assertEq(harness.totalAt(10), 6, "block 10 as it stood");
        assertEq(harness.select(4, 10), 1);
        assertEq(harness.totalAt(11), 3);
        assertEq(harness.select(2, 11), 2, "entry 2's range moved down");
        (start, weight) = harness.rangeAt(1, 11);
        assertEq(weight, 0);
        assertEq(harness.totalAt(9), 0, "before anything was added");
    }

    /// @dev Any weights added over several blocks and some removed later: at every block, a number below that
    /// block's total selects the entry a linear scan over that block's weights finds.
    function testFuzz_select_matchesLinearScanAtEveryBlock(uint256 seed, uint8 count, uint256 number) public {
        count = uint8(bound(count, 1, 30));
        uint256[] memory weights = new uint256[](count);
        vm.roll(100);
        for (uint256 i = 0; i < count; ++i) {
            weights[i] = uint256(keccak256(abi.encode(seed, i))) % 1_000 + 1;
            harness.append(address(uint160(i + 1)), weights[i]);
        }
        vm.roll(101);
        for (uint256 i = 0; i < count; ++i) {
            if (uint256(keccak256(abi.encode(seed, "out", i))) % 3 == 0) harness.remove(i);
        }
        for (uint256 blockNumber = 100; blockNumber <= 101; ++blockNumber) {
            uint256 total;
            for (uint256 i = 0; i < count; ++i) {
                (, uint256 weight) = harness.rangeAt(i, blockNumber);
                if (blockNumber == 100) assertEq(weight, weights[i]);
                total += weight;
            }
            assertEq(harness.totalAt(blockNumber), total);
            if (total == 0) continue;
            uint256 n = bound(number, 0, total - 1);
            uint256 expected;
            uint256 end;
            for (; expected < count; ++expected) {
                (, uint256 weight) = harness.rangeAt(expected, blockNumber);
                end += weight;
                if (end > n) break;
            }
            assertEq(harness.select(n, blockNumber), expected, "the entry whose range holds the number");
        }
    }
}
