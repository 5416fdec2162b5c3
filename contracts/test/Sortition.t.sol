// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {Test} from "forge-std/Test.sol";
import {Sortition} from "../src/libraries/Sortition.sol";

/// @notice Exposes the library over one pool.
contract SortitionHarness {
    using Sortition for Sortition.Pool;

    Sortition.Pool internal pool;

    function append(address account, uint256 weight) external {
        pool.append(account, weight);
    }

    function total() external view returns (uint256) {
        return pool.total();
    }

    function select(uint256 number, uint256 bound) external view returns (address account) {
        (account,) = pool.select(number, bound);
    }

    function weightAt(uint256 number, uint256 bound) external view returns (uint256 weight) {
        (, weight) = pool.select(number, bound);
    }
}

/// @notice The binary search agrees with a linear scan, and a draw bounded by an earlier total never lands on a
/// later entry.
contract SortitionTest is Test {
    SortitionHarness internal harness = new SortitionHarness();

    function test_select_rangesAndErrors() public {
        vm.expectRevert(abi.encodeWithSelector(Sortition.DrawOutOfRange.selector, 0, 0));
        harness.select(0, 0);
        vm.expectRevert(Sortition.ZeroWeight.selector);
        harness.append(address(1), 0);
        harness.append(address(1), 2); // [0, 2)
        harness.append(address(2), 3); // [2, 5)
        harness.append(address(1), 1); // [5, 6)
        assertEq(harness.total(), 6);
        address[6] memory expected = [address(1), address(1), address(2), address(2), address(2), address(1)];
        for (uint256 n = 0; n < 6; ++n) {
            assertEq(harness.select(n, 6), expected[n]);
        }
        vm.expectRevert(abi.encodeWithSelector(Sortition.DrawOutOfRange.selector, 6, 6));
        harness.select(6, 6);
        vm.expectRevert(abi.encodeWithSelector(Sortition.DrawOutOfRange.selector, 0, 7));
        harness.select(0, 7);
    }

    /// @dev Any weights, any number below an earlier total: the entry a linear scan finds, never a later one.
    function testFuzz_select_matchesLinearScan(uint256 seed, uint8 count, uint8 cut, uint256 number) public {
        count = uint8(bound(count, 1, 40));
        cut = uint8(bound(cut, 1, count));
        uint256[] memory ends = new uint256[](count);
        uint256 running;
        for (uint256 i = 0; i < count; ++i) {
            uint256 weight = uint256(keccak256(abi.encode(seed, i))) % 1_000 + 1;
            running += weight;
            ends[i] = running;
            harness.append(address(uint160(i + 1)), weight);
        }
        uint256 bound_ = ends[cut - 1];
        number = bound(number, 0, bound_ - 1);
        uint256 expected;
        while (ends[expected] <= number) ++expected;
        address chosen = harness.select(number, bound_);
        assertEq(chosen, address(uint160(expected + 1)));
        assertLt(expected, cut, "drawn from an entry added after the bound");
    }
}
