// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {BaseTest} from "./BaseTest.sol";
import {IArbitration} from "../src/interfaces/IArbitration.sol";
import {ITaskRegistry} from "../src/interfaces/ITaskRegistry.sol";
import {IGPURegistry} from "../src/interfaces/IGPURegistry.sol";

/// @notice Whole task lives, from registration to the last withdrawal, with exact token balances at the end.
contract LifecycleTest is BaseTest {
    function setUp() public override {
        super.setUp();
        _registerAll();
    }

    function _withdraw(address who) internal returns (uint256) {
        vm.prank(who);
        return escrow.withdraw();
    }

    function _unstakeAll(uint256 i) internal {
        IGPURegistry.Stake memory s = registry.stakeOf(miners[i]);
        vm.prank(miners[i]);
        registry.requestUnstake(s.free);
    }

    function _uint8(ITaskRegistry.TaskStatus s) internal pure returns (uint8) {
        return uint8(s);
    }

    function test_lifecycle_finalizeThenEveryoneCashesOut() public {
        uint256 id = _createTask(alice, MAX_PRICE);
        assertEq(_uint8(_status(id)), 1);
        _assign(id, _miners(3));
        assertEq(_uint8(_status(id)), 2);
        _commit(id, _commitment(_rootOf(_standardLeaves(id)), PAYMENT, 3));
        assertEq(_uint8(_status(id)), 3);

        // Locked stake cannot leave while the task can still be disputed.
        vm.prank(miners[0]);
        vm.expectRevert(
            abi.encodeWithSelector(
                IGPURegistry.InsufficientFreeStake.selector,
                miners[0],
                MINER_STAKE,
                MINER_STAKE - MIN_STAKE_LOCK
            )
        );
        registry.requestUnstake(MINER_STAKE);

        vm.warp(tasks.challengeEndsAt(id));
        tasks.finalizeTask(id);
        assertEq(_uint8(_status(id)), 5);

        assertEq(_withdraw(alice), 22_222_223);
        assertEq(_withdraw(miners[0]), 24_629_631);
        assertEq(_withdraw(miners[1]), 24_629_629);
        assertEq(_withdraw(miners[2]), 24_629_629);
        assertEq(_withdraw(feeRecipient), 3_888_888);
        assertEq(token.balanceOf(address(escrow)), 0);
        assertEq(escrow.totalLiabilities(), 0);

        for (uint256 i = 0; i < 3; ++i) {
            _unstakeAll(i);
        }
        vm.warp(block.timestamp + UNBONDING);
        for (uint256 i = 0; i < 3; ++i) {
            vm.prank(miners[i]);
            registry.withdrawStake();
        }
        assertEq(token.balanceOf(alice), 22_222_223, "alice paid exactly PAYMENT");
        assertEq(token.balanceOf(miners[0]), MINER_STAKE + 24_629_631);
        assertEq(token.balanceOf(miners[1]), MINER_STAKE + 24_629_629);
        assertEq(token.balanceOf(miners[2]), MINER_STAKE + 24_629_629);
        assertEq(token.balanceOf(feeRecipient), 3_888_888);
        assertEq(token.balanceOf(address(registry)), MINER_STAKE, "only miner 3 is still staked");
        assertEq(
            token.totalSupply(), MAX_PRICE + MINER_COUNT * MINER_STAKE + VERIFIER_COUNT * MIN_VERIFIER_STAKE
        );
    }

    function test_lifecycle_cancelReturnsEverything() public {
        uint256 id = _createTask(alice, MAX_PRICE);
        vm.prank(alice);
        tasks.cancelTask(id);
        assertEq(_uint8(_status(id)), 7);
        assertEq(_withdraw(alice), MAX_PRICE);
        assertEq(token.balanceOf(alice), MAX_PRICE);
        assertEq(token.balanceOf(address(escrow)), 0);
    }

    function test_lifecycle_expireOpenTask() public {
        uint256 id = _createTask(alice, MAX_PRICE);
        vm.warp(uint256(tasks.getTask(id).deadline) + 1);
        tasks.expireTask(id);
        assertEq(_uint8(_status(id)), 6);
        assertEq(_withdraw(alice), MAX_PRICE);
        assertEq(token.balanceOf(alice), MAX_PRICE);
    }

    function test_lifecycle_expireAssignedTaskFreesStake() public {
        uint256 id = _assignedTask(alice, 4);
        vm.warp(uint256(tasks.getTask(id).deadline) + 1);
        tasks.expireTask(id);
        assertEq(_withdraw(alice), MAX_PRICE);
        for (uint256 i = 0; i < MINER_COUNT; ++i) {
            assertEq(_locked(miners[i]), 0);
            assertEq(escrow.balanceOf(miners[i]), 0);
            _unstakeAll(i);
        }
        vm.warp(block.timestamp + UNBONDING);
        for (uint256 i = 0; i < MINER_COUNT; ++i) {
            vm.prank(miners[i]);
            assertEq(registry.withdrawStake(), MINER_STAKE);
        }
        assertEq(token.balanceOf(address(registry)), 0);
        assertEq(token.balanceOf(alice), MAX_PRICE);
    }

    /// @dev Three tasks at once with shared miners and three different ends; at the end every token is where it
    /// should be.
    function test_lifecycle_concurrentTasksConserveTokens() public {
        uint256 finalized = _committedTask(alice); // miners 0..2
        uint256 expired = _assignedTask(bob, 2); // miners 0..1
        uint256 disputed = _committedTask(bob); // miners 0..2
        assertEq(_locked(miners[0]), 3 * MIN_STAKE_LOCK);

        uint256 d = _openDispute(disputed, 1); // [m2]
        _runRound(d, IArbitration.Vote.MinersAtFault);
        _warpPastAppeal(d);
        arbitration.resolve(d);
        tasks.finalizeTask(finalized);
        vm.warp(uint256(tasks.getTask(expired).deadline) + 1);
        tasks.expireTask(expired);

        for (uint256 i = 0; i < MINER_COUNT; ++i) {
            assertEq(_locked(miners[i]), 0);
        }
        assertEq(_free(miners[2]), MINER_STAKE - MIN_STAKE_LOCK);

        // alice: refund of the finalized task. bob: expired task, disputed task escrow, bond (a slash is no
        // party's). The jurors share the 1,000,000 reward by seat; the slash's rest and the dust go to the pool.
        assertEq(_withdraw(alice), 22_222_223);
        assertEq(_withdraw(bob), MAX_PRICE + MAX_PRICE + DISPUTE_BOND);
        uint256 seats = arbitration.roundOf(d, 0).seatsDrawn;
        assertGt(seats, 0);
        for (uint256 i = 0; i < VERIFIER_COUNT; ++i) {
            uint256 mine = _seats(d, 0, verifiers[i]);
            if (mine != 0) assertEq(_withdraw(verifiers[i]), 1_000_000 / seats * mine);
        }
        assertEq(escrow.auditPool(), 9_000_000 + 1_000_000 % seats);
        assertEq(_withdraw(miners[0]), 24_629_631);
        assertEq(_withdraw(feeRecipient), 3_888_888);
        assertEq(
            token.balanceOf(address(escrow)),
            2 * 24_629_629 + 9_000_000 + 1_000_000 % seats,
            "miners 1 and 2 have not withdrawn yet; the slash's rest and the dust are in the audit pool"
        );
        _assertEscrowSolvent();

        uint256 supply = token.totalSupply();
        uint256 held = token.balanceOf(address(registry)) + token.balanceOf(address(escrow))
            + token.balanceOf(address(verifierRegistry));
        address[11] memory people = [
            alice,
            bob,
            verifiers[0],
            verifiers[1],
            verifiers[2],
            verifiers[3],
            miners[0],
            miners[1],
            miners[2],
            miners[3],
            feeRecipient
        ];
        for (uint256 i = 0; i < people.length; ++i) {
            held += token.balanceOf(people[i]);
        }
        assertEq(held, supply, "no token created or lost");
        assertEq(
            supply,
            3 * uint256(MAX_PRICE) + DISPUTE_BOND + MINER_COUNT * MINER_STAKE + VERIFIER_COUNT
                * MIN_VERIFIER_STAKE
        );
    }

    /// @dev A miner whose signer key is rotated mid-task signs that task's commitment with the key it accepted
    /// the task with (a task's parties are fixed at assignment); the new key signs the tasks it accepts next.
    function test_lifecycle_signerRotationDuringTask() public {
        uint256 id = _assignedTask(alice, 1);
        uint256 acceptedKey = signerKeys[0];
        (address fresh, uint256 freshKey) = makeAddrAndKey("rotated signer");
        vm.prank(miners[0]);
        registry.setSigner(fresh);
        ITaskRegistry.Commitment memory c = _commitment(keccak256("r"), PAYMENT, 1);
        signerKeys[0] = freshKey;
        bytes[] memory withNewKey = _signatures(id, c);
        vm.prank(coordinator);
        vm.expectRevert(abi.encodeWithSelector(ITaskRegistry.InvalidSignature.selector, miners[0], fresh));
        tasks.commitResults(id, c, withNewKey);
        signerKeys[0] = acceptedKey;
        _commit(id, c);
        vm.warp(tasks.challengeEndsAt(id));
        tasks.finalizeTask(id);
        assertEq(escrow.balanceOf(miners[0]), PAYMENT - 3_888_888);

        signerKeys[0] = freshKey; // the next task is accepted and signed with the new key
        uint256 next = _assignedTask(alice, 1);
        assertEq(tasks.signersOf(next)[0], fresh);
        _commit(next, _commitment(keccak256("r2"), PAYMENT, 1));
    }
}
