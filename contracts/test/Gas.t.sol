// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {BaseTest} from "./BaseTest.sol";
import {ITaskRegistry} from "../src/interfaces/ITaskRegistry.sol";

/// @notice Gas per task does not depend on the number of requests in the batch: the contracts keep only roots,
/// hashes and counters. Gas metering is paused except around the four protocol calls, so each test's snapshot entry
/// is the gas of one task's create, assign, commit and finalize (less same-transaction refunds), plus the test
/// contract's own selector dispatch, which differs by a gas or two between test names.
contract GasTest is BaseTest {
    function setUp() public override {
        super.setUp();
        _registerAll();
    }

    /// @notice Gas of createTask, assignTask, commitResults and finalizeTask for one task of `requestCount`
    /// requests, measured with gasleft(); preparation is not counted. External, so that every measurement starts
    /// with fresh memory (memory expansion in the caller would otherwise differ between runs).
    function lifecycle(uint32 requestCount) external returns (uint256 used) {
        ITaskRegistry.CreateTaskParams memory p = _taskParams(MAX_PRICE);
        p.requestCount = requestCount;
        _fund(alice, address(escrow), MAX_PRICE);
        uint256 id = tasks.taskCount() + 1;
        address[] memory assigned = _miners(3);
        ITaskRegistry.Commitment memory c = _commitment(keccak256("results"), PAYMENT, 3);
        bytes[] memory sigs = _signaturesOf(id, c, assigned);

        vm.prank(alice);
        vm.resumeGasMetering();
        uint256 g = gasleft();
        tasks.createTask(p);
        used = g - gasleft();
        vm.pauseGasMetering();

        vm.prank(coordinator);
        vm.resumeGasMetering();
        g = gasleft();
        tasks.assignTask(id, assigned, STAKE_LOCK);
        used += g - gasleft();
        vm.pauseGasMetering();

        vm.prank(coordinator);
        vm.resumeGasMetering();
        g = gasleft();
        tasks.commitResults(id, c, sigs);
        used += g - gasleft();
        vm.pauseGasMetering();

        vm.warp(block.timestamp + CHALLENGE_WINDOW);
        vm.resumeGasMetering();
        g = gasleft();
        tasks.finalizeTask(id);
        used += g - gasleft();
        vm.pauseGasMetering();

        assertEq(tasks.getTask(id).requestCount, requestCount);
        assertEq(uint8(tasks.getTask(id).status), uint8(ITaskRegistry.TaskStatus.Finalized));
    }

    function test_gas_lifecycle_10_requests() public {
        vm.pauseGasMetering();
        this.lifecycle(10);
    }

    function test_gas_lifecycle_50000_requests() public {
        vm.pauseGasMetering();
        this.lifecycle(50_000);
    }

    /// @dev The exact comparison: each run from the same state, 10 vs 50,000 vs 2^32 - 1 requests.
    function test_gas_lifecycle_independentOfRequestCount() public {
        vm.pauseGasMetering();
        uint256 snap = vm.snapshotState();
        uint256 small = this.lifecycle(10);
        vm.revertToState(snap);
        uint256 large = this.lifecycle(50_000);
        vm.revertToState(snap);
        uint256 largest = this.lifecycle(type(uint32).max);
        assertEq(small, large);
        assertEq(small, largest);
        assertGt(small, 0);
    }
}
