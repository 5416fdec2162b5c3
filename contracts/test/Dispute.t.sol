// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {BaseTest} from "./BaseTest.sol";
import {IArbitration as IA} from "../src/interfaces/IArbitration.sol";
import {ITaskRegistry} from "../src/interfaces/ITaskRegistry.sol";
import {IGPURegistry} from "../src/interfaces/IGPURegistry.sol";
import {IPaymentEscrow} from "../src/interfaces/IPaymentEscrow.sol";
import {ResultLeaf} from "../src/libraries/ResultLeaf.sol";

/// @notice The three dispute outcomes, with exact payouts down to the rounding dust. Standard task: 100e6 escrowed
/// by alice, miners 0..2 lock 10e6 each, 77_777_777 committed (fee 3_888_888, shares 24_629_631 / 24_629_629 /
/// 24_629_629, refund 22_222_223); bond 5e6; reward 10%.
contract DisputeOutcomeTest is BaseTest {
    uint256 internal constant FEE = 3_888_888;
    uint256 internal constant SHARE0 = 24_629_631;
    uint256 internal constant SHARE = 24_629_629;
    uint256 internal constant REFUND = 22_222_223;

    IA.Vote internal constant AT_FAULT = IA.Vote.MinersAtFault;
    IA.Vote internal constant CORRECT = IA.Vote.MinersCorrect;

    uint256 internal taskId;

    function setUp() public override {
        super.setUp();
        _registerAll();
        taskId = _committedTask(alice);
        assertEq(SHARE0 + 2 * SHARE + FEE + REFUND, MAX_PRICE);
    }

    /// @dev alice, miners 0..3, the fee recipient, verifiers 0..3.
    function _who() internal view returns (address[10] memory) {
        return [
            alice,
            miners[0],
            miners[1],
            miners[2],
            miners[3],
            feeRecipient,
            verifiers[0],
            verifiers[1],
            verifiers[2],
            verifiers[3]
        ];
    }

    /// @dev Escrow balances of `_who()` are exactly `expected`, all backed; then everyone withdraws and token
    /// balances move by exactly those amounts.
    function _checkPayouts(uint256[10] memory expected) internal {
        address[10] memory who = _who();
        uint256 total;
        for (uint256 i = 0; i < 10; ++i) {
            assertEq(escrow.balanceOf(who[i]), expected[i], vm.toString(who[i]));
            total += expected[i];
        }
        assertEq(escrow.totalLiabilities(), total, "liabilities");
        assertEq(escrow.escrowOf(taskId), 0, "escrow settled");
        _assertEscrowSolvent();
        for (uint256 i = 0; i < 10; ++i) {
            uint256 before = token.balanceOf(who[i]);
            if (expected[i] > 0) {
                vm.prank(who[i]);
                assertEq(escrow.withdraw(), expected[i]);
            }
            assertEq(token.balanceOf(who[i]) - before, expected[i]);
        }
        assertEq(token.balanceOf(address(escrow)) + escrow.totalLiabilities(), 0, "escrow empty");
    }

    function _assertStake(uint256 miner, uint256 free) internal view {
        IGPURegistry.Stake memory s = registry.stakeOf(miners[miner]);
        assertEq(s.free, free, "free");
        assertEq(s.locked, 0, "locked");
    }

    function _assertRegistryBacked() internal view {
        uint256 sum;
        for (uint256 i = 0; i < MINER_COUNT; ++i) {
            IGPURegistry.Stake memory s = registry.stakeOf(miners[i]);
            sum += s.free + s.locked + s.unbonding;
        }
        assertEq(token.balanceOf(address(registry)), sum);
    }

    function _resolve(uint256 disputeId, IA.DisputeStatus expected) internal {
        _warpPastVoting(disputeId);
        vm.prank(stranger);
        assertEq(uint8(arbitration.resolve(disputeId)), uint8(expected));
        assertEq(uint8(arbitration.getDispute(disputeId).status), uint8(expected));
        assertEq(uint8(_status(taskId)), uint8(ITaskRegistry.TaskStatus.Finalized));
        assertEq(escrow.bondOf(disputeId), 0, "bond settled");
    }

    // ---- miners at fault

    /// @dev Leaf 0 ([m0, m1]); three verifiers find fault, one disagrees. 20e6 slashed; 2e6 reward in three shares of
    /// 666_666; alice gets the escrow, her bond and 20e6 - 1_999_998.
    function test_atFault_slashesPipelineRefundsOwnerAndRewardsVoters() public {
        uint256 id = _openDispute(taskId, 0);
        _vote(id, 0, AT_FAULT);
        _vote(id, 1, CORRECT);
        _vote(id, 2, AT_FAULT);
        _vote(id, 3, AT_FAULT);
        uint256 registryBefore = token.balanceOf(address(registry));
        _warpPastVoting(id);

        vm.expectEmit(address(registry));
        emit IGPURegistry.StakeSlashed(miners[0], MIN_STAKE_LOCK, address(escrow));
        vm.expectEmit(address(registry));
        emit IGPURegistry.StakeSlashed(miners[1], MIN_STAKE_LOCK, address(escrow));
        vm.expectEmit(address(registry));
        emit IGPURegistry.StakeUnlocked(miners[2], MIN_STAKE_LOCK);
        vm.expectEmit(address(escrow));
        emit IPaymentEscrow.EscrowSettled(taskId, 0, alice, MAX_PRICE);
        vm.expectEmit(address(tasks));
        emit ITaskRegistry.TaskRefunded(taskId, 20e6);
        vm.expectEmit(address(escrow));
        emit IPaymentEscrow.Credited(verifiers[0], 666_666);
        vm.expectEmit(address(escrow));
        emit IPaymentEscrow.Credited(verifiers[2], 666_666);
        vm.expectEmit(address(escrow));
        emit IPaymentEscrow.Credited(verifiers[3], 666_666);
        vm.expectEmit(address(escrow));
        emit IPaymentEscrow.Credited(alice, 18_000_002);
        vm.expectEmit(address(escrow));
        emit IPaymentEscrow.BondSettled(id, 0, alice, DISPUTE_BOND);
        vm.expectEmit(address(arbitration));
        emit IA.DisputeResolved(id, IA.DisputeStatus.MinersAtFault, 20e6, 2e6, 3);
        arbitration.resolve(id);

        uint256[10] memory expected =
            [MAX_PRICE + 18_000_002 + DISPUTE_BOND, 0, 0, 0, 0, 0, 666_666, 0, 666_666, 666_666];
        _checkPayouts(expected);
        _assertStake(0, MINER_STAKE - MIN_STAKE_LOCK);
        _assertStake(1, MINER_STAKE - MIN_STAKE_LOCK);
        _assertStake(2, MINER_STAKE);
        _assertStake(3, MINER_STAKE);
        assertEq(registryBefore - token.balanceOf(address(registry)), 20e6);
        _assertRegistryBacked();
    }

    /// @dev Leaf 2 ([m0, m1, m2]) with a single voter: all 30e6 slashed, the whole 3e6 reward to that voter.
    function test_atFault_wholePipelineSingleVoter() public {
        uint256 id = _openDispute(taskId, 2);
        _vote(id, 1, AT_FAULT);
        vm.expectEmit(address(arbitration));
        emit IA.DisputeResolved(id, IA.DisputeStatus.MinersAtFault, 30e6, 3e6, 1);
        _resolve(id, IA.DisputeStatus.MinersAtFault);

        uint256[10] memory expected = [MAX_PRICE + 27e6 + DISPUTE_BOND, 0, 0, 0, 0, 0, 0, 3e6, 0, 0];
        _checkPayouts(expected);
        for (uint256 i = 0; i < 3; ++i) {
            _assertStake(i, MINER_STAKE - MIN_STAKE_LOCK);
        }
        _assertRegistryBacked();
    }

    /// @dev Leaf 1 ([m2]) with three voters: 10e6 slashed, reward 1e6 in shares of 333_333, dust to alice.
    function test_atFault_rewardDustGoesToOwner() public {
        uint256 id = _openDispute(taskId, 1);
        _vote(id, 0, AT_FAULT);
        _vote(id, 1, AT_FAULT);
        _vote(id, 2, AT_FAULT);
        vm.expectEmit(address(arbitration));
        emit IA.DisputeResolved(id, IA.DisputeStatus.MinersAtFault, 10e6, 1e6, 3);
        _resolve(id, IA.DisputeStatus.MinersAtFault);

        uint256[10] memory expected =
            [MAX_PRICE + 9_000_001 + DISPUTE_BOND, 0, 0, 0, 0, 0, 333_333, 333_333, 333_333, 0];
        _checkPayouts(expected);
        _assertStake(0, MINER_STAKE);
        _assertStake(1, MINER_STAKE);
        _assertStake(2, MINER_STAKE - MIN_STAKE_LOCK);
    }

    /// @dev Leaf 3 names no miner: nothing to slash, but the owner still gets escrow and bond back.
    function test_atFault_emptyPipelineSlashesNobody() public {
        uint256 id = _openDispute(taskId, 3);
        _vote(id, 0, AT_FAULT);
        vm.expectEmit(address(tasks));
        emit ITaskRegistry.TaskRefunded(taskId, 0);
        vm.expectEmit(address(arbitration));
        emit IA.DisputeResolved(id, IA.DisputeStatus.MinersAtFault, 0, 0, 1);
        _resolve(id, IA.DisputeStatus.MinersAtFault);

        uint256[10] memory expected = [MAX_PRICE + DISPUTE_BOND, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        _checkPayouts(expected);
        for (uint256 i = 0; i < MINER_COUNT; ++i) {
            _assertStake(i, MINER_STAKE);
        }
    }

    /// @dev A slash takes only this task's lock; the miner's lock for another task stays and that task settles.
    function test_atFault_leavesOtherTaskLocksAlone() public {
        uint256 other = _assignedTask(bob, 1); // miner 0 again
        assertEq(_locked(miners[0]), 2 * MIN_STAKE_LOCK);
        uint256 id = _openDispute(taskId, 0);
        _vote(id, 0, AT_FAULT);
        _resolve(id, IA.DisputeStatus.MinersAtFault);
        assertEq(_locked(miners[0]), MIN_STAKE_LOCK);
        assertEq(_free(miners[0]), MINER_STAKE - 2 * MIN_STAKE_LOCK);

        _commit(other, _commitment(keccak256("other"), 1e6, 1));
        vm.warp(tasks.challengeEndsAt(other));
        tasks.finalizeTask(other);
        assertEq(_locked(miners[0]), 0);
        assertEq(_free(miners[0]), MINER_STAKE - MIN_STAKE_LOCK);
        assertEq(escrow.balanceOf(miners[0]), 1e6 - 50_000);
        _assertRegistryBacked();
    }

    // ---- miners correct

    /// @dev Leaf 2 ([m0, m1, m2]); three say correct, one at fault. The task settles as committed; the bond pays
    /// 500_000 reward in three shares of 166_666 and the rest, 4_500_002, in three parts of 1_500_000 with dust 2 to
    /// the first pipeline miner. Alice loses the bond.
    function test_correct_settlesTaskAndForfeitsBond() public {
        uint256 id = _openDispute(taskId, 2);
        _vote(id, 0, CORRECT);
        _vote(id, 1, CORRECT);
        _vote(id, 2, AT_FAULT);
        _vote(id, 3, CORRECT);
        _warpPastVoting(id);

        vm.expectEmit(address(tasks));
        emit ITaskRegistry.TaskFinalized(taskId, PAYMENT, MAX_PRICE - PAYMENT);
        vm.expectEmit(address(escrow));
        emit IPaymentEscrow.BondSettled(id, 499_998 + 3 * 1_500_000, miners[0], 2);
        vm.expectEmit(address(arbitration));
        emit IA.DisputeResolved(id, IA.DisputeStatus.MinersCorrect, 0, 500_000, 3);
        arbitration.resolve(id);

        uint256[10] memory expected = [
            REFUND,
            SHARE0 + 1_500_000 + 2,
            SHARE + 1_500_000,
            SHARE + 1_500_000,
            0,
            FEE,
            166_666,
            166_666,
            0,
            166_666
        ];
        _checkPayouts(expected);
        for (uint256 i = 0; i < MINER_COUNT; ++i) {
            _assertStake(i, MINER_STAKE);
        }
        _assertRegistryBacked();
    }

    /// @dev Leaf 0 ([m0, m1]) with one voter: the voter takes the whole 500_000, the pipeline 2_250_000 each; m2,
    /// outside the pipeline, gets only its task share.
    function test_correct_singleVoterTwoMinerPipeline() public {
        uint256 id = _openDispute(taskId, 0);
        _vote(id, 3, CORRECT);
        vm.expectEmit(address(arbitration));
        emit IA.DisputeResolved(id, IA.DisputeStatus.MinersCorrect, 0, 500_000, 1);
        _resolve(id, IA.DisputeStatus.MinersCorrect);

        uint256[10] memory expected =
            [REFUND, SHARE0 + 2_250_000, SHARE + 2_250_000, SHARE, 0, FEE, 0, 0, 0, 500_000];
        _checkPayouts(expected);
    }

    /// @dev Leaf 3 names no miner: what the voters do not take goes to the coordinator's fee recipient.
    function test_correct_emptyPipelinePaysFeeRecipient() public {
        uint256 id = _openDispute(taskId, 3);
        _vote(id, 0, CORRECT);
        _vote(id, 1, CORRECT);
        _vote(id, 2, CORRECT);
        vm.expectEmit(address(escrow));
        emit IPaymentEscrow.BondSettled(id, 499_998, feeRecipient, 4_500_002);
        _resolve(id, IA.DisputeStatus.MinersCorrect);

        uint256[10] memory expected =
            [REFUND, SHARE0, SHARE, SHARE, 0, FEE + 4_500_002, 166_666, 166_666, 166_666, 0];
        _checkPayouts(expected);
    }

    /// @dev A committed leaf whose pipeline names the zero address still resolves: that share of the forfeited
    /// bond (and the rounding remainder, which follows pipeline[0]) goes to the fee recipient.
    function test_correct_zeroAddressInPipelinePaysFeeRecipient() public {
        uint256 other = _assignedTask(alice, 3);
        ResultLeaf.Leaf[] memory leaves = new ResultLeaf.Leaf[](2);
        leaves[0] = _leaf(other, 0, _pair(address(0), miners[2]));
        leaves[1] = _leaf(other, 1, _miners(3));
        _commit(other, _commitment(_rootOf(leaves), PAYMENT, 3));
        _fund(alice, address(escrow), DISPUTE_BOND);
        vm.prank(alice);
        uint256 id = arbitration.openDispute(other, leaves[0], _proofOf(leaves, 0));
        _vote(id, 0, CORRECT);
        _warpPastVoting(id);

        uint256 feeBefore = escrow.balanceOf(feeRecipient);
        uint256 minerBefore = escrow.balanceOf(miners[2]);
        assertEq(uint8(arbitration.resolve(id)), uint8(IA.DisputeStatus.MinersCorrect));
        // 5e6 bond: 500_000 to the voter, 2_250_000 to miner 2, 2_250_000 to the fee recipient, on top of the
        // task's own settlement (fee and miner share)
        assertEq(escrow.balanceOf(verifiers[0]), 500_000);
        assertEq(escrow.balanceOf(miners[2]) - minerBefore, SHARE + 2_250_000);
        assertEq(escrow.balanceOf(feeRecipient) - feeBefore, FEE + 2_250_000);
        assertEq(escrow.balanceOf(address(0)), 0);
        _assertEscrowSolvent();
    }

    function test_correct_zeroRewardGivesWholeBondToPipeline() public {
        vm.prank(admin);
        arbitration.setVerifierReward(0);
        uint256 id = _openDispute(taskId, 1); // [m2]
        _vote(id, 0, CORRECT);
        _vote(id, 1, CORRECT);
        _resolve(id, IA.DisputeStatus.MinersCorrect);
        uint256[10] memory expected = [REFUND, SHARE0, SHARE, SHARE + DISPUTE_BOND, 0, FEE, 0, 0, 0, 0];
        _checkPayouts(expected);
    }

    // ---- no decision

    /// @dev Nobody voted: the results stand and the bond goes back in full.
    function test_noDecision_noVotes() public {
        uint256 id = _openDispute(taskId, 0);
        vm.expectEmit(address(tasks));
        emit ITaskRegistry.TaskFinalized(taskId, PAYMENT, MAX_PRICE - PAYMENT);
        vm.expectEmit(address(escrow));
        emit IPaymentEscrow.BondSettled(id, 0, alice, DISPUTE_BOND);
        vm.expectEmit(address(arbitration));
        emit IA.DisputeResolved(id, IA.DisputeStatus.NoDecision, 0, 0, 0);
        _resolve(id, IA.DisputeStatus.NoDecision);

        uint256[10] memory expected = [REFUND + DISPUTE_BOND, SHARE0, SHARE, SHARE, 0, FEE, 0, 0, 0, 0];
        _checkPayouts(expected);
        for (uint256 i = 0; i < MINER_COUNT; ++i) {
            _assertStake(i, MINER_STAKE);
        }
    }

    /// @dev A tie is no decision; voters on either side get nothing.
    function test_noDecision_tie() public {
        uint256 id = _openDispute(taskId, 2);
        _vote(id, 0, CORRECT);
        _vote(id, 1, AT_FAULT);
        _vote(id, 2, AT_FAULT);
        _vote(id, 3, CORRECT);
        vm.expectEmit(address(arbitration));
        emit IA.DisputeResolved(id, IA.DisputeStatus.NoDecision, 0, 0, 0);
        _resolve(id, IA.DisputeStatus.NoDecision);

        uint256[10] memory expected = [REFUND + DISPUTE_BOND, SHARE0, SHARE, SHARE, 0, FEE, 0, 0, 0, 0];
        _checkPayouts(expected);
    }

    /// @dev Resolution waits for the voting deadline, not the challenge window, and anyone may call it.
    function test_resolve_longAfterDeadline() public {
        uint256 id = _openDispute(taskId, 0);
        _vote(id, 0, CORRECT);
        vm.warp(block.timestamp + 365 days);
        vm.prank(miners[0]);
        assertEq(uint8(arbitration.resolve(id)), uint8(IA.DisputeStatus.MinersCorrect));
    }
}
