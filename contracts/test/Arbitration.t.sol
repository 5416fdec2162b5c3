// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {IERC20Errors} from "@openzeppelin/contracts/interfaces/draft-IERC6093.sol";
import {BaseTest} from "./BaseTest.sol";
import {ResultTree} from "./utils/ResultTree.sol";
import {Arbitration} from "../src/Arbitration.sol";
import {IArbitration as IA} from "../src/interfaces/IArbitration.sol";
import {ITaskRegistry} from "../src/interfaces/ITaskRegistry.sol";
import {IGPURegistry} from "../src/interfaces/IGPURegistry.sol";
import {IPaymentEscrow} from "../src/interfaces/IPaymentEscrow.sol";
import {ResultLeaf} from "../src/libraries/ResultLeaf.sol";

/// @notice Arbitration entry points and every way they refuse. Outcomes and payouts: Dispute.t.sol.
contract ArbitrationTest is BaseTest {
    uint256 internal taskId;

    function setUp() public override {
        super.setUp();
        _registerAll();
        taskId = _committedTask(alice);
        _fund(alice, address(escrow), DISPUTE_BOND);
    }

    function _leaves() internal view returns (ResultLeaf.Leaf[] memory) {
        return _standardLeaves(taskId);
    }

    function _expectOpenRevert(
        uint256 id,
        ResultLeaf.Leaf memory leaf,
        bytes32[] memory proof,
        bytes memory err
    ) internal {
        vm.prank(alice);
        vm.expectRevert(err);
        arbitration.openDispute(id, leaf, proof);
    }

    function _config() internal pure returns (Arbitration.Config memory) {
        return Arbitration.Config(
            DISPUTE_BOND, VOTING_PERIOD, REWARD_BPS, MIN_VERIFIER_STAKE, VERIFIER_UNBONDING, AUDIT_RATE_BPS
        );
    }

    // ---- constructor, admin

    function test_constructor_setsConfig() public {
        vm.expectEmit();
        emit IA.DisputeBondChanged(DISPUTE_BOND);
        vm.expectEmit();
        emit IA.VerifierUnbondingPeriodChanged(VERIFIER_UNBONDING);
        vm.expectEmit();
        emit IA.VotingPeriodChanged(VOTING_PERIOD);
        vm.expectEmit();
        emit IA.VerifierRewardChanged(REWARD_BPS);
        vm.expectEmit();
        emit IA.MinVerifierStakeChanged(MIN_VERIFIER_STAKE);
        vm.expectEmit();
        emit IA.AuditRateChanged(AUDIT_RATE_BPS);
        Arbitration a = new Arbitration(tasks, registry, escrow, bob, _config());
        assertTrue(a.hasRole(0x00, bob));
        assertEq(a.disputeBond(), DISPUTE_BOND);
        assertEq(a.votingPeriod(), VOTING_PERIOD);
        assertEq(a.verifierRewardBps(), REWARD_BPS);
        assertEq(a.minVerifierStake(), MIN_VERIFIER_STAKE);
        assertEq(a.verifierUnbondingPeriod(), VERIFIER_UNBONDING);
        assertEq(a.auditRateBps(), AUDIT_RATE_BPS);
        assertEq(address(a.token()), address(token));
    }

    function test_constructor_reverts() public {
        Arbitration.Config memory c = _config();
        vm.expectRevert(IA.ZeroAddress.selector);
        new Arbitration(ITaskRegistry(address(0)), registry, escrow, admin, c);
        vm.expectRevert(IA.ZeroAddress.selector);
        new Arbitration(tasks, IGPURegistry(address(0)), escrow, admin, c);
        vm.expectRevert(IA.ZeroAddress.selector);
        new Arbitration(tasks, registry, IPaymentEscrow(address(0)), admin, c);
        vm.expectRevert(IA.ZeroAddress.selector);
        new Arbitration(tasks, registry, escrow, address(0), c);
        c.disputeBond = 0;
        vm.expectRevert(IA.ZeroBond.selector);
        new Arbitration(tasks, registry, escrow, admin, c);
        c = _config();
        c.votingPeriod = 59;
        vm.expectRevert(abi.encodeWithSelector(IA.VotingPeriodTooShort.selector, 59, 60));
        new Arbitration(tasks, registry, escrow, admin, c);
        // Stake must not finish unbonding while a dispute about it could still be open.
        c.votingPeriod = 2 days;
        vm.expectRevert(abi.encodeWithSelector(IA.UnbondingTooShort.selector, 3 days, 3 days));
        new Arbitration(tasks, registry, escrow, admin, c);
        c = _config();
        c.verifierRewardBps = 5_001;
        vm.expectRevert(abi.encodeWithSelector(IA.RewardTooHigh.selector, 5_001, 5_000));
        new Arbitration(tasks, registry, escrow, admin, c);
        // A verifier's stake must stay while it can still vote.
        c = _config();
        c.verifierUnbondingPeriod = VOTING_PERIOD - 1;
        vm.expectRevert(
            abi.encodeWithSelector(IA.VerifierUnbondingTooShort.selector, VOTING_PERIOD - 1, VOTING_PERIOD)
        );
        new Arbitration(tasks, registry, escrow, admin, c);
        c.verifierUnbondingPeriod = 30 days + 1;
        vm.expectRevert(abi.encodeWithSelector(IA.VerifierUnbondingTooLong.selector, 30 days + 1, 30 days));
        new Arbitration(tasks, registry, escrow, admin, c);
        c = _config();
        c.minVerifierStake = 0;
        vm.expectRevert(IA.ZeroVerifierStake.selector);
        new Arbitration(tasks, registry, escrow, admin, c);
        c = _config();
        c.auditRateBps = 10_001;
        vm.expectRevert(abi.encodeWithSelector(IA.AuditRateTooHigh.selector, 10_001, 10_000));
        new Arbitration(tasks, registry, escrow, admin, c);
    }

    function test_setDisputeBond() public {
        vm.expectEmit(address(arbitration));
        emit IA.DisputeBondChanged(7e6);
        vm.prank(admin);
        arbitration.setDisputeBond(7e6);
        assertEq(arbitration.disputeBond(), 7e6);
        vm.prank(admin);
        vm.expectRevert(IA.ZeroBond.selector);
        arbitration.setDisputeBond(0);
        vm.prank(stranger);
        vm.expectRevert(_unauthorized(stranger, 0x00));
        arbitration.setDisputeBond(1);
    }

    function test_setVotingPeriod() public {
        vm.expectEmit(address(arbitration));
        emit IA.VotingPeriodChanged(2 days - 1);
        vm.prank(admin);
        arbitration.setVotingPeriod(2 days - 1);
        assertEq(arbitration.votingPeriod(), 2 days - 1);
        vm.startPrank(admin);
        vm.expectRevert(abi.encodeWithSelector(IA.VotingPeriodTooShort.selector, 59, 60));
        arbitration.setVotingPeriod(59);
        vm.expectRevert(abi.encodeWithSelector(IA.UnbondingTooShort.selector, 3 days, 3 days));
        arbitration.setVotingPeriod(2 days);
        // Nor may voting outlast the verifiers' unbonding.
        arbitration.setVerifierUnbondingPeriod(2 days - 1);
        registry.setUnbondingPeriod(5 days);
        vm.expectRevert(abi.encodeWithSelector(IA.VerifierUnbondingTooShort.selector, 2 days - 1, 2 days));
        arbitration.setVotingPeriod(2 days);
        arbitration.setVerifierUnbondingPeriod(VERIFIER_UNBONDING);
        registry.setUnbondingPeriod(UNBONDING);
        // The check reads the current challenge window and unbonding period.
        tasks.setChallengeWindow(2 days);
        vm.expectRevert(abi.encodeWithSelector(IA.UnbondingTooShort.selector, 3 days, 3 days));
        arbitration.setVotingPeriod(1 days);
        registry.setUnbondingPeriod(4 days);
        arbitration.setVotingPeriod(1 days);
        vm.stopPrank();
        vm.prank(stranger);
        vm.expectRevert(_unauthorized(stranger, 0x00));
        arbitration.setVotingPeriod(1 hours);
    }

    function test_setVerifierReward() public {
        vm.expectEmit(address(arbitration));
        emit IA.VerifierRewardChanged(5_000);
        vm.prank(admin);
        arbitration.setVerifierReward(5_000);
        assertEq(arbitration.verifierRewardBps(), 5_000);
        vm.prank(admin);
        vm.expectRevert(abi.encodeWithSelector(IA.RewardTooHigh.selector, 5_001, 5_000));
        arbitration.setVerifierReward(5_001);
        vm.prank(stranger);
        vm.expectRevert(_unauthorized(stranger, 0x00));
        arbitration.setVerifierReward(0);
    }

    // ---- openDispute

    function test_openDispute_freezesTaskAndTakesBond() public {
        ResultLeaf.Leaf[] memory ls = _leaves();
        bytes32 leafHash = ResultTree.hashLeaf(ls[0]);
        uint64 deadline = T0 + 1 days;
        vm.expectEmit(address(tasks));
        emit ITaskRegistry.TaskDisputed(taskId);
        vm.expectEmit(address(escrow));
        emit IPaymentEscrow.BondDeposited(1, alice, DISPUTE_BOND);
        vm.expectEmit(address(arbitration));
        emit IA.DisputeOpened(1, taskId, alice, 0, leafHash, 5e6, deadline);
        vm.prank(alice);
        assertEq(arbitration.openDispute(taskId, ls[0], _proofOf(ls, 0)), 1);

        IA.Dispute memory d = arbitration.getDispute(1);
        assertEq(
            abi.encode(d),
            abi.encode(
                IA.Dispute(
                    taskId,
                    alice,
                    deadline,
                    IA.DisputeStatus.Open,
                    0,
                    0,
                    5e6,
                    0,
                    uint64(block.number),
                    false,
                    leafHash
                )
            )
        );
        assertEq(arbitration.pipelineOf(1), ls[0].pipeline);
        assertEq(arbitration.votersOf(1).length, 0);
        assertEq(arbitration.disputeOfTask(taskId), 1);
        assertEq(arbitration.disputeCount(), 1);
        assertEq(uint8(_status(taskId)), uint8(ITaskRegistry.TaskStatus.Disputed));
        assertEq(escrow.bondOf(1), DISPUTE_BOND);
        assertEq(token.balanceOf(alice), 0);
        _assertEscrowSolvent();
    }

    function test_openDispute_anyLeafUntilLastSecondOfWindow() public {
        vm.warp(tasks.challengeEndsAt(taskId) - 1);
        ResultLeaf.Leaf[] memory ls = _leaves();
        for (uint256 i = 0; i < ls.length; ++i) {
            uint256 snap = vm.snapshotState();
            vm.prank(alice);
            arbitration.openDispute(taskId, ls[i], _proofOf(ls, i));
            assertEq(arbitration.getDispute(1).requestIndex, i);
            assertEq(arbitration.pipelineOf(1), ls[i].pipeline);
            vm.revertToState(snap);
        }
    }

    function test_openDispute_singleLeafTree() public {
        uint256 id = _assignedTask(bob, 1);
        ResultLeaf.Leaf[] memory ls = new ResultLeaf.Leaf[](1);
        ls[0] = _leaf(id, 0, _miners(1));
        _commit(id, _commitment(_rootOf(ls), PAYMENT, 1));
        assertEq(tasks.getTask(id).resultsRoot, ResultTree.hashLeaf(ls[0]));
        _fund(bob, address(escrow), DISPUTE_BOND);
        vm.prank(bob);
        arbitration.openDispute(id, ls[0], new bytes32[](0));
        assertEq(uint8(_status(id)), uint8(ITaskRegistry.TaskStatus.Disputed));
    }

    function test_openDispute_reverts() public {
        ResultLeaf.Leaf[] memory ls = _leaves();
        bytes32[] memory proof = _proofOf(ls, 0);
        vm.prank(bob);
        vm.expectRevert(abi.encodeWithSelector(IA.NotTaskOwner.selector, taskId, bob));
        arbitration.openDispute(taskId, ls[0], proof);
        _expectOpenRevert(99, ls[0], proof, abi.encodeWithSelector(IA.NotTaskOwner.selector, 99, alice));
        _expectOpenRevert(
            taskId, ls[0], new bytes32[](65), abi.encodeWithSelector(IA.ProofTooLong.selector, 65, 64)
        );
        _expectOpenRevert(
            taskId,
            _leaf(taskId, 0, new address[](33)),
            proof,
            abi.encodeWithSelector(IA.PipelineTooLong.selector, 33, 32)
        );
        ResultLeaf.Leaf memory leaf = _leaves()[0];
        leaf.taskId = taskId + 1;
        _expectOpenRevert(
            taskId, leaf, proof, abi.encodeWithSelector(IA.LeafTaskMismatch.selector, taskId, taskId + 1)
        );
    }

    function test_openDispute_oneDisputePerTask() public {
        _openDispute(taskId, 0);
        ResultLeaf.Leaf[] memory ls = _leaves();
        bytes memory err = abi.encodeWithSelector(IA.DisputeAlreadyOpen.selector, taskId, 1);
        _fund(alice, address(escrow), DISPUTE_BOND);
        _expectOpenRevert(taskId, ls[1], _proofOf(ls, 1), err);
        _warpPastVoting(1);
        arbitration.resolve(1);
        _expectOpenRevert(taskId, ls[1], _proofOf(ls, 1), err);
    }

    function test_openDispute_rejectsLeavesNotCommitted() public {
        bytes memory err = abi.encodeWithSelector(IA.InvalidProof.selector);
        ResultLeaf.Leaf[] memory ls = _leaves();
        bytes32[] memory proof = _proofOf(ls, 0);
        ResultLeaf.Leaf memory leaf = _leaves()[0];
        leaf.outputHash = keccak256("a different answer");
        _expectOpenRevert(taskId, leaf, proof, err);
        leaf = _leaves()[0];
        leaf.requestIndex = 1;
        _expectOpenRevert(taskId, leaf, proof, err);
        leaf = _leaves()[0];
        leaf.outputTokens += 1;
        _expectOpenRevert(taskId, leaf, proof, err);
        leaf = _leaves()[0];
        leaf.pipeline[1] = miners[2]; // blaming another pipeline than the committed one
        _expectOpenRevert(taskId, leaf, proof, err);
        // The genuine leaf with another leaf's proof, or none.
        _expectOpenRevert(taskId, ls[0], _proofOf(ls, 1), err);
        _expectOpenRevert(taskId, ls[0], new bytes32[](0), err);
        // Before any commit there is no root to prove against.
        uint256 id = _assignedTask(alice, 3);
        ls = _standardLeaves(id);
        _expectOpenRevert(id, ls[0], _proofOf(ls, 0), err);
        assertEq(arbitration.disputeCount(), 0);
    }

    function test_openDispute_revertsOutsideWindow() public {
        ResultLeaf.Leaf[] memory ls = _leaves();
        uint256 endsAt = tasks.challengeEndsAt(taskId);
        vm.warp(endsAt);
        _expectOpenRevert(
            taskId,
            ls[0],
            _proofOf(ls, 0),
            abi.encodeWithSelector(ITaskRegistry.ChallengeWindowClosed.selector, taskId, endsAt)
        );
        tasks.finalizeTask(taskId);
        _expectOpenRevert(
            taskId,
            ls[0],
            _proofOf(ls, 0),
            _wrongStatus(
                taskId, ITaskRegistry.TaskStatus.Finalized, ITaskRegistry.TaskStatus.ResultsCommitted
            )
        );
    }

    function test_openDispute_revertsWithoutBondAllowance() public {
        vm.prank(alice);
        token.approve(address(escrow), DISPUTE_BOND - 1);
        ResultLeaf.Leaf[] memory ls = _leaves();
        _expectOpenRevert(
            taskId,
            ls[0],
            _proofOf(ls, 0),
            abi.encodeWithSelector(
                IERC20Errors.ERC20InsufficientAllowance.selector,
                address(escrow),
                DISPUTE_BOND - 1,
                DISPUTE_BOND
            )
        );
        assertEq(uint8(_status(taskId)), uint8(ITaskRegistry.TaskStatus.ResultsCommitted));
    }

    // ---- vote

    function test_vote_recordsVotes() public {
        uint256 id = _openDispute(taskId, 0);
        vm.expectEmit(address(arbitration));
        emit IA.VoteCast(id, verifiers[0], IA.Vote.MinersAtFault);
        _vote(id, 0, IA.Vote.MinersAtFault);
        vm.expectEmit(address(arbitration));
        emit IA.VoteCast(id, verifiers[1], IA.Vote.MinersCorrect);
        _vote(id, 1, IA.Vote.MinersCorrect);
        vm.warp(arbitration.getDispute(id).votingDeadline - 1); // last second
        _vote(id, 2, IA.Vote.MinersAtFault);

        IA.Dispute memory d = arbitration.getDispute(id);
        assertEq(d.votesAtFault, 2);
        assertEq(d.votesCorrect, 1);
        address[] memory voters = arbitration.votersOf(id);
        assertEq(voters.length, 3);
        assertEq(voters[0], verifiers[0]);
        assertEq(voters[2], verifiers[2]);
        assertEq(uint8(arbitration.voteOf(id, verifiers[1])), uint8(IA.Vote.MinersCorrect));
        assertEq(uint8(arbitration.voteOf(id, verifiers[3])), uint8(IA.Vote.None));
    }

    function test_vote_reverts() public {
        vm.prank(verifiers[0]);
        vm.expectRevert(abi.encodeWithSelector(IA.UnknownDispute.selector, 1));
        arbitration.vote(1, IA.Vote.MinersAtFault);
        vm.prank(alice); // who may vote is checked first
        vm.expectRevert(abi.encodeWithSelector(IA.NotVerifier.selector, alice));
        arbitration.vote(1, IA.Vote.MinersAtFault);

        uint256 id = _openDispute(taskId, 0);
        vm.prank(alice);
        vm.expectRevert(abi.encodeWithSelector(IA.NotVerifier.selector, alice));
        arbitration.vote(id, IA.Vote.MinersAtFault);
        vm.startPrank(verifiers[0]);
        vm.expectRevert(IA.InvalidVote.selector);
        arbitration.vote(id, IA.Vote.None);
        arbitration.vote(id, IA.Vote.MinersAtFault);
        vm.expectRevert(abi.encodeWithSelector(IA.AlreadyVoted.selector, id, verifiers[0]));
        arbitration.vote(id, IA.Vote.MinersCorrect);
        vm.stopPrank();

        // Registered in the dispute's own block, or later: too late for this dispute.
        address late = makeAddr("late verifier");
        _registerVerifier(late);
        vm.prank(late);
        vm.expectRevert(abi.encodeWithSelector(IA.VerifierNotEligible.selector, id, late));
        arbitration.vote(id, IA.Vote.MinersAtFault);
        vm.roll(block.number + 1);
        vm.prank(late);
        vm.expectRevert(abi.encodeWithSelector(IA.VerifierNotEligible.selector, id, late));
        arbitration.vote(id, IA.Vote.MinersAtFault);

        uint64 deadline = arbitration.getDispute(id).votingDeadline;
        vm.warp(deadline);
        vm.prank(verifiers[2]);
        vm.expectRevert(abi.encodeWithSelector(IA.VotingClosed.selector, id, deadline));
        arbitration.vote(id, IA.Vote.MinersAtFault);

        arbitration.resolve(id);
        vm.warp(1); // even with the clock rolled back, a resolved dispute takes no votes
        vm.prank(verifiers[2]);
        vm.expectRevert(abi.encodeWithSelector(IA.DisputeNotOpen.selector, id));
        arbitration.vote(id, IA.Vote.MinersAtFault);
    }

    function test_vote_revertsAfterFifteenVoters() public {
        address[] memory voters = new address[](16);
        for (uint256 i = 0; i < 16; ++i) {
            voters[i] = vm.addr(0xBEEF00 + i);
            _registerVerifier(voters[i]);
        }
        vm.roll(block.number + 1);
        uint256 id = _openDispute(taskId, 0);
        for (uint256 i = 0; i < 16; ++i) {
            vm.prank(voters[i]);
            if (i == 15) vm.expectRevert(abi.encodeWithSelector(IA.TooManyVotes.selector, id, 15));
            arbitration.vote(id, IA.Vote.MinersAtFault);
        }
        assertEq(arbitration.votersOf(id).length, 15);
        assertEq(arbitration.getDispute(id).votesAtFault, 15);
    }

    // ---- resolve

    function test_resolve_reverts() public {
        vm.expectRevert(abi.encodeWithSelector(IA.UnknownDispute.selector, 3));
        arbitration.resolve(3);
        uint256 id = _openDispute(taskId, 0);
        uint64 deadline = arbitration.getDispute(id).votingDeadline;
        vm.warp(deadline - 1);
        vm.expectRevert(abi.encodeWithSelector(IA.VotingStillOpen.selector, id, deadline));
        arbitration.resolve(id);
        vm.warp(deadline);
        arbitration.resolve(id);
        vm.expectRevert(abi.encodeWithSelector(IA.DisputeNotOpen.selector, id));
        arbitration.resolve(id);
    }

    /// @dev Pausing the task registry and the miner registry stops new work, never a dispute in progress.
    function test_disputeRunsWhileEverythingIsPaused() public {
        vm.startPrank(admin);
        tasks.pause();
        registry.pause();
        vm.stopPrank();
        uint256 id = _openDispute(taskId, 0);
        _vote(id, 0, IA.Vote.MinersAtFault);
        _warpPastVoting(id);
        vm.prank(stranger);
        assertEq(uint8(arbitration.resolve(id)), uint8(IA.DisputeStatus.MinersAtFault));
        uint256 before = token.balanceOf(alice);
        vm.prank(alice);
        escrow.withdraw();
        assertEq(token.balanceOf(alice) - before, MAX_PRICE + DISPUTE_BOND + 18e6);
    }
}
