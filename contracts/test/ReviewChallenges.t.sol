// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {BaseTest} from "./BaseTest.sol";
import {ITaskRegistry as IT} from "../src/interfaces/ITaskRegistry.sol";
import {IArbitration as IA} from "../src/interfaces/IArbitration.sol";
import {ILineChallenges as IL} from "../src/interfaces/ILineChallenges.sol";
import {ResultLeaf} from "../src/libraries/ResultLeaf.sol";
import {ResultTree} from "./utils/ResultTree.sol";

/// @notice A cold review of LineChallenges and its interplay with the task registry (refutations, vouches,
/// commits, finalization) and arbitration (owner disputes, audits). Each test_poc_ is an attacker's attempt and
/// asserts what must hold if the system is safe: a failing test is a vulnerability.
contract ReviewChallengesTest is BaseTest {
    IA.Vote internal constant AT_FAULT = IA.Vote.MinersAtFault;
    IA.Vote internal constant CORRECT = IA.Vote.MinersCorrect;

    function setUp() public override {
        super.setUp();
        _registerAll();
    }

    // ------------------------------------------------------------------------------------------ helpers

    /// @dev An answer attempt that may fail; returns whether it went through.
    function _tryAnswer(uint256 id, ResultLeaf.Leaf[] memory leaves, uint256 index) internal returns (bool) {
        vm.prank(stranger);
        try challenges.answerLine(id, leaves[index], _proofOf(leaves, index), _servedProofs(leaves, index)) {
            return true;
        } catch {
            return false;
        }
    }

    function _statusOf(uint256 id, uint256 index) internal view returns (IL.ChallengeStatus) {
        return challenges.challengeOf(id, index).status;
    }

    /// @dev A task of `count` requests for MAX_PRICE assigned to miners 0..2.
    function _taskOf(uint32 count) internal returns (uint256 id) {
        IT.CreateTaskParams memory p = _taskParams(MAX_PRICE);
        p.requestCount = count;
        _fund(alice, address(escrow), MAX_PRICE);
        vm.prank(alice);
        id = tasks.createTask(p);
        _assign(id, _miners(3));
    }

    function _assertNoFloat() internal view {
        assertEq(escrow.arbitrationFloat(), 0, "arbitration float left between transactions");
        _assertEscrowSolvent();
    }

    // ------------------------------------------------------------------ double refunds and settlement order

    /// @dev Two positions go unanswered: the second settlement moves nothing (the task is refunded and its
    /// signers slashed once), the float is empty and the dispute counter is back to zero.
    function test_poc_twoUnansweredChallenges_refundOnce() public {
        uint256 id = _committedTask(alice);
        _challenge(id, 0);
        _challenge(id, 3);
        skip(ANSWER_PERIOD + 1);
        challenges.settleUnanswered(id, 0);
        uint256 afterFirst = escrow.balanceOf(alice);
        challenges.settleUnanswered(id, 3);
        assertEq(afterFirst, MAX_PRICE);
        assertEq(escrow.balanceOf(alice), afterFirst, "refunded twice");
        for (uint256 i = 0; i < 3; ++i) {
            assertEq(_free(miners[i]), MINER_STAKE - STAKE_LOCK);
            assertEq(_locked(miners[i]), 0);
        }
        assertEq(tasks.openDisputesOf(id), 0);
        assertEq(escrow.auditPool(), 3 * STAKE_LOCK, "the three locks, once");
        _assertNoFloat();
    }

    /// @dev A refutation lands while two challenges are open: it refunds and slashes once; a challenge settled
    /// unanswered afterwards and one answered afterwards move nothing more; no new challenge opens.
    function test_poc_refutationDuringChallenges_noDoubleRefund() public {
        (uint256 id, ResultLeaf.Leaf[] memory leaves) = _overchargedTask(100_000);
        _challenge(id, 0);
        _challenge(id, 1);
        uint256 pool = escrow.auditPool();
        vm.prank(stranger);
        tasks.refuteUsage(id, leaves[2], _proofOf(leaves, 2));
        assertEq(uint8(_status(id)), uint8(IT.TaskStatus.Finalized));
        uint256 refunded = escrow.balanceOf(alice);
        assertEq(refunded, MAX_PRICE);
        assertEq(escrow.auditPool(), pool + 3 * STAKE_LOCK);

        vm.expectRevert();
        _challenge(id, 2);
        _answer(id, leaves, 1);
        skip(ANSWER_PERIOD + 1);
        challenges.settleUnanswered(id, 0);
        assertEq(escrow.balanceOf(alice), refunded, "a second refund after the refutation");
        for (uint256 i = 0; i < 3; ++i) {
            assertEq(_free(miners[i]), MINER_STAKE - STAKE_LOCK, "slashed once");
            assertEq(_locked(miners[i]), 0);
        }
        assertEq(tasks.openDisputesOf(id), 0);
        _assertNoFloat();
    }

    /// @dev An unanswered challenge first, then the refutation: refused (the task is settled), nothing twice.
    function test_poc_unansweredThenRefutation_refused() public {
        (uint256 id, ResultLeaf.Leaf[] memory leaves) = _overchargedTask(100_000);
        _challenge(id, 0);
        skip(ANSWER_PERIOD + 1);
        challenges.settleUnanswered(id, 0);
        vm.expectRevert();
        tasks.refuteUsage(id, leaves[2], _proofOf(leaves, 2));
        assertEq(escrow.balanceOf(alice), MAX_PRICE);
        assertEq(escrow.auditPool(), 3 * STAKE_LOCK);
        _assertNoFloat();
    }

    /// @dev Re-entering a challenge's status: answered twice, answered after being settled, settled after being
    /// answered: all refused.
    function test_poc_challengeStatusIsFinal() public {
        uint256 id = _committedTask(alice);
        ResultLeaf.Leaf[] memory leaves = _standardLeaves(id);
        _challenge(id, 0);
        _challenge(id, 1);
        _answer(id, leaves, 0);
        vm.expectRevert(abi.encodeWithSelector(IL.NotOpen.selector, id, 0));
        _answer(id, leaves, 0);
        skip(ANSWER_PERIOD + 1);
        vm.expectRevert(abi.encodeWithSelector(IL.NotOpen.selector, id, 0));
        challenges.settleUnanswered(id, 0);
        challenges.settleUnanswered(id, 1);
        vm.expectRevert(abi.encodeWithSelector(IL.NotOpen.selector, id, 1));
        _answer(id, leaves, 1);
        vm.expectRevert(abi.encodeWithSelector(IL.NotOpen.selector, id, 1));
        challenges.settleUnanswered(id, 1);
        assertEq(tasks.openDisputesOf(id), 0);
        assertEq(escrow.balanceOf(alice), MAX_PRICE);
        _assertNoFloat();
    }

    /// @dev Only the owner challenges: the coordinator, a miner or a stranger cannot use up MAX_CHALLENGES or
    /// hold the task.
    function test_poc_onlyOwnerChallenges() public {
        uint256 id = _committedTask(alice);
        address[3] memory others = [coordinator, miners[0], stranger];
        for (uint256 i = 0; i < others.length; ++i) {
            vm.prank(others[i]);
            vm.expectRevert(abi.encodeWithSelector(IL.NotTaskOwner.selector, id, others[i]));
            challenges.challengeLine(id, 0);
        }
        assertEq(challenges.challengedLinesOf(id).length, 0);
        assertEq(uint8(_status(id)), uint8(IT.TaskStatus.ResultsCommitted));
    }

    // ---------------------------------------------------------------------------------- forged answers

    /// @dev The leaf of the same position of another task (same pipeline, same counts) answers nothing, billed
    /// or not.
    function test_poc_answerWithLeafOfAnotherTask_refused() public {
        uint256 id = _committedTask(alice);
        uint256 other = _committedTask(alice);
        ResultLeaf.Leaf[] memory theirs = _standardLeaves(other);
        _challenge(id, 0);
        _challenge(id, 3);
        vm.expectRevert();
        challenges.answerLine(id, theirs[0], _proofOf(theirs, 0), _servedProofs(theirs, 0));
        vm.expectRevert();
        challenges.answerLine(id, theirs[3], _proofOf(theirs, 3), _servedProofs(theirs, 3));
        assertEq(uint8(_statusOf(id, 0)), uint8(IL.ChallengeStatus.Open));
        assertEq(uint8(_statusOf(id, 3)), uint8(IL.ChallengeStatus.Open));
    }

    /// @dev A real leaf of another position, relabelled to the challenged one (with its own or the challenged
    /// position's proof), and the challenged leaf with its counts zeroed (to skip the served proof): refused.
    function test_poc_answerWithLeafOfAnotherPosition_refused() public {
        uint256 id = _committedTask(alice);
        ResultLeaf.Leaf[] memory leaves = _standardLeaves(id);
        _challenge(id, 1);

        ResultLeaf.Leaf memory moved = _standardLeaves(id)[3]; // a copy: bills nothing, needs no served proof
        moved.requestIndex = 1;
        vm.expectRevert();
        challenges.answerLine(id, moved, _proofOf(leaves, 3), new bytes32[][](0));
        vm.expectRevert();
        challenges.answerLine(id, moved, _proofOf(leaves, 1), new bytes32[][](0));

        ResultLeaf.Leaf memory zeroed = _standardLeaves(id)[1];
        zeroed.inputTokens = 0;
        zeroed.outputTokens = 0;
        vm.expectRevert();
        challenges.answerLine(id, zeroed, _proofOf(leaves, 1), new bytes32[][](0));

        ResultLeaf.Leaf memory billedMoved = _standardLeaves(id)[0];
        billedMoved.requestIndex = 1;
        vm.expectRevert();
        challenges.answerLine(id, billedMoved, _proofOf(leaves, 0), _servedProofs(leaves, 0));

        // the unmoved leaf of position 3 answers nothing either: position 3 was never challenged
        vm.expectRevert(abi.encodeWithSelector(IL.NotOpen.selector, id, 3));
        _answer(id, leaves, 3);
        assertEq(uint8(_statusOf(id, 1)), uint8(IL.ChallengeStatus.Open));
    }

    // -------------------------------------------------------------------------------- honest answerers

    /// @dev An honest miner holding only its own served tree answers a line of a multi-miner pipeline: the other
    /// pipeline entries' proofs may be empty. Then the task pays exactly.
    function test_poc_honestSignerAnswersWithItsOwnServedProofOnly() public {
        uint256 id = _committedTask(alice);
        ResultLeaf.Leaf[] memory leaves = _standardLeaves(id);
        _challenge(id, 2);
        bytes32[][] memory all = _servedProofs(leaves, 2);
        bytes32[][] memory mine = new bytes32[][](3);
        mine[2] = all[2]; // miner 2's own proof only
        vm.prank(miners[2]);
        challenges.answerLine(id, leaves[2], _proofOf(leaves, 2), mine);
        assertEq(uint8(_statusOf(id, 2)), uint8(IL.ChallengeStatus.Answered));
        _assertPaid(id, _signedWork(id));
        _assertNoFloat();
    }

    /// @dev The coordinator leaves miner 1 out (a miner gone for good) while the leaves still name it next to a
    /// signer: every position answers through the signers' served roots; the task pays the signers, miner 1 is
    /// unlocked and unpaid.
    function test_poc_minerLeftOut_everyLineStillAnswerable() public {
        uint256 id = _assignedTask(alice, 3);
        ResultLeaf.Leaf[] memory leaves = _standardLeaves(id);
        IT.Commitment memory c = _honestCommitment(id, leaves);
        _commitSignedBy(id, c, 5);
        for (uint256 i = 0; i < REQUESTS; ++i) {
            _challenge(id, i);
        }
        for (uint256 i = 0; i < REQUESTS; ++i) {
            _answer(id, leaves, i);
        }
        _assertPaid(id, c);
        assertEq(escrow.balanceOf(miners[1]), 0);
        _assertNoFloat();
    }

    /// @dev Work the miners vouched for on-chain and a stranger committed (the coordinator withheld the commit)
    /// answers every challenge and is paid exactly.
    function test_poc_vouchedCommit_answersAndPays() public {
        uint256 id = _assignedTask(alice, 3);
        IT.Commitment memory c = _signedWork(id);
        _vouchAll(id, c);
        vm.prank(stranger);
        tasks.commitResults(id, c, new bytes[](3));
        assertEq(tasks.signedMaskOf(id), 7);
        ResultLeaf.Leaf[] memory leaves = _standardLeaves(id);
        _challenge(id, 0);
        _challenge(id, 3);
        _answer(id, leaves, 0);
        _answer(id, leaves, 3);
        _assertPaid(id, c);
        _assertNoFloat();
    }

    /// @dev Trees of 1, 3 and 5 positions (an odd last node carried up; a last line that bills nothing): the
    /// first and last positions answer, and the task pays exactly.
    function test_poc_requestCountEdges_answerable() public {
        uint32[3] memory counts = [uint32(1), 3, 5];
        for (uint256 k = 0; k < counts.length; ++k) {
            uint32 n = counts[k];
            uint256 id = _taskOf(n);
            ResultLeaf.Leaf[] memory leaves = new ResultLeaf.Leaf[](n);
            for (uint32 i = 0; i < n; ++i) {
                leaves[i] =
                    i == 4 ? _leaf(id, i, new address[](0)) : _leaf(id, i, _pair(miners[0], miners[1]));
            }
            _commitLeaves(id, leaves);
            uint256 payment = tasks.getTask(id).payment;
            uint256 ownerBefore = escrow.balanceOf(alice);
            _challenge(id, 0);
            if (n > 1) _challenge(id, n - 1);
            vm.expectRevert(abi.encodeWithSelector(IL.IndexOutOfRange.selector, n, n));
            _challenge(id, n);
            _answer(id, leaves, 0);
            if (n > 1) _answer(id, leaves, n - 1);
            vm.warp(tasks.challengeEndsAt(id));
            tasks.finalizeTask(id);
            assertEq(escrow.balanceOf(alice), ownerBefore + MAX_PRICE - payment);
            assertEq(_locked(miners[0]), 0);
        }
        _assertNoFloat();
    }

    // ----------------------------------------------------------------------- disputes and audits together

    /// @dev A challenge opened and answered while the owner's dispute runs; the dispute then finds the miners
    /// correct: the task settles once, at the committed amounts, and the owner's forfeited bond goes to the
    /// leaf's pipeline as arbitration says.
    function test_poc_challengeDuringOwnerDispute_settlesOnce() public {
        _newVerifiers("honest", 10, 1);
        uint256 id = _committedTask(alice);
        ResultLeaf.Leaf[] memory leaves = _standardLeaves(id);
        uint256 d = _openDispute(id, 0);
        _challenge(id, 3);
        skip(1 hours);
        _answer(id, leaves, 3);
        assertEq(uint8(_status(id)), uint8(IT.TaskStatus.Disputed), "the owner's dispute still holds it");
        _decide(d, CORRECT);
        assertEq(uint8(_status(id)), uint8(IT.TaskStatus.Finalized));
        IT.Commitment memory c = _signedWork(id);
        uint256 forfeited = DISPUTE_BOND - DISPUTE_BOND * REWARD_BPS / 10_000;
        assertEq(escrow.balanceOf(alice), MAX_PRICE - PAYMENT);
        assertEq(escrow.balanceOf(miners[0]), c.minerAmounts[0] + forfeited - forfeited / 2);
        assertEq(escrow.balanceOf(miners[1]), c.minerAmounts[1] + forfeited / 2);
        assertEq(escrow.balanceOf(miners[2]), c.minerAmounts[2]);
        for (uint256 i = 0; i < 3; ++i) {
            assertEq(_free(miners[i]), MINER_STAKE);
        }
        vm.expectRevert();
        _challenge(id, 1);
        assertEq(tasks.openDisputesOf(id), 0);
        _assertNoFloat();
    }

    /// @dev The owner's dispute settles the task (miners correct): no challenge can open afterwards.
    function test_poc_challengeAfterOwnerDisputeSettled_refused() public {
        _newVerifiers("honest", 10, 1);
        uint256 id = _committedTask(alice);
        uint256 d = _openDispute(id, 0);
        _decide(d, CORRECT);
        assertEq(uint8(_status(id)), uint8(IT.TaskStatus.Finalized));
        uint256 owner = escrow.balanceOf(alice);
        vm.expectRevert();
        _challenge(id, 3);
        assertEq(escrow.balanceOf(alice), owner);
        _assertNoFloat();
    }

    /// @dev A challenge goes unanswered while the owner's dispute runs; the dispute then finds the miners at
    /// fault: the owner gets its bond back and nothing more (no second refund, no second slash).
    function test_poc_unansweredThenOwnerDisputeAtFault_noDoublePayout() public {
        _newVerifiers("honest", 10, 1);
        uint256 id = _committedTask(alice);
        uint256 d = _openDispute(id, 0);
        _challenge(id, 3);
        skip(ANSWER_PERIOD + 1);
        challenges.settleUnanswered(id, 3);
        assertEq(escrow.balanceOf(alice), MAX_PRICE);
        _decide(d, AT_FAULT);
        assertEq(escrow.balanceOf(alice), MAX_PRICE + DISPUTE_BOND, "only the bond comes back");
        for (uint256 i = 0; i < 3; ++i) {
            assertEq(_free(miners[i]), MINER_STAKE - STAKE_LOCK, "slashed once");
            assertEq(_locked(miners[i]), 0);
        }
        assertEq(tasks.openDisputesOf(id), 0);
        _assertNoFloat();
    }

    /// @dev A challenge opened and answered while an audit runs; the audit finds the line correct: the pool
    /// loses only the jurors' reward, the task settles at the committed amounts after its (extended) window.
    function test_poc_challengeDuringAudit_poolAndPaymentExact() public {
        _newVerifiers("honest", 10, 1);
        uint256 id = _auditableTask();
        _selectedAudit(id);
        uint256 pool = escrow.auditPool();
        uint256 d = _openAudit(id, verifiers[0]);
        _challenge(id, 3);
        skip(1 hours);
        _answer(id, _standardLeaves(id), 3);
        assertEq(uint8(_status(id)), uint8(IT.TaskStatus.Disputed), "the audit still holds it");
        _decide(d, CORRECT);
        assertEq(uint8(_status(id)), uint8(IT.TaskStatus.ResultsCommitted));
        uint256 seats = arbitration.roundOf(d, 0).seatsDrawn;
        uint256 reward = DISPUTE_BOND * REWARD_BPS / 10_000;
        assertEq(escrow.auditPool(), pool - reward + reward % seats, "pool: bond back less the reward");
        _assertPaid(id, _signedWork(id));
        _assertNoFloat();
    }

    /// @dev An audit convicts its line's pipeline; a challenge open since before goes unanswered and is settled
    /// afterwards: it slashes no one else (the miners outside the pipeline were unlocked whole) and pays no one
    /// anything more.
    function test_poc_auditAtFaultThenUnansweredChallenge_noSecondSlash() public {
        _newVerifiers("honest", 10, 1);
        uint256 id = _auditableTask();
        _selectedAudit(id);
        uint256 d = _openAudit(id, verifiers[0]);
        _challenge(id, 3);
        uint256 pool = escrow.auditPool();
        _decide(d, AT_FAULT);
        assertEq(uint8(_status(id)), uint8(IT.TaskStatus.Finalized));
        address[] memory pipeline = arbitration.pipelineOf(d);
        uint256 slashed = pipeline.length * STAKE_LOCK;
        uint256 reward = slashed * REWARD_BPS / 10_000;
        uint256 pooled =
            pool + DISPUTE_BOND + slashed - reward + reward % arbitration.roundOf(d, 0).seatsDrawn;
        assertEq(escrow.balanceOf(alice), MAX_PRICE, "the owner: refunded (a slash is no party's)");
        assertEq(escrow.auditPool(), pooled, "the pool: its bond back and the slash's rest");
        challenges.settleUnanswered(id, 3);
        assertEq(escrow.balanceOf(alice), MAX_PRICE, "paid twice");
        assertEq(escrow.auditPool(), pooled, "pooled twice");
        for (uint256 i = 0; i < 3; ++i) {
            bool convicted = _in(pipeline, miners[i]);
            assertEq(_free(miners[i]), convicted ? MINER_STAKE - STAKE_LOCK : MINER_STAKE);
            assertEq(_locked(miners[i]), 0);
        }
        assertEq(tasks.openDisputesOf(id), 0);
        _assertNoFloat();
    }

    // ------------------------------------------------------------------------------------------- windows

    /// @dev The owner opens every challenge at once and the miners answer all within the same hour: the task was
    /// held one hour, so its window should be extended by one hour, not once per overlapping challenge (16
    /// challenges answered at their deadline hold payment 96 hours for 6 hours of waiting).
    function test_poc_overlappingChallengesExtendWindowOncePerHold() public {
        uint256 id = _committedTask(alice);
        ResultLeaf.Leaf[] memory leaves = _standardLeaves(id);
        uint256 endsBefore = tasks.challengeEndsAt(id);
        for (uint256 i = 0; i < REQUESTS; ++i) {
            _challenge(id, i);
        }
        skip(1 hours);
        for (uint256 i = 0; i < REQUESTS; ++i) {
            _answer(id, leaves, i);
        }
        assertEq(tasks.challengeEndsAt(id), endsBefore + 1 hours, "window extended beyond the time held");
    }

    /// @dev A challenge opened in the last second of the window keeps the task Disputed past its end; while it is
    /// open the owner opens its one arbitration dispute, which the registry accepts because the task is already
    /// Disputed. That must not let the owner dispute at a moment the window (as the answer would extend it) no
    /// longer covers: the answer extends the window by the wait, so the dispute lies inside it.
    function test_poc_disputeThroughOpenChallenge_staysInsideExtendedWindow() public {
        _newVerifiers("honest", 10, 1);
        uint256 id = _committedTask(alice);
        ResultLeaf.Leaf[] memory leaves = _standardLeaves(id);
        vm.warp(tasks.challengeEndsAt(id) - 1);
        _challenge(id, 3);
        skip(2 hours);
        uint256 disputedAt = block.timestamp;
        _openDispute(id, 0);
        _answer(id, leaves, 3);
        assertGt(tasks.challengeEndsAt(id), disputedAt, "the dispute was opened outside the owner's window");
    }

    // ------------------------------------------------------------------------- honest signers framed

    /// @dev Honest miners sign what a coordinator shows them: a signing request whose assigned miners are in
    /// `shown` order and whose task has `shownCount` requests. The signed message names both (the contract reads
    /// them from the task), so a view that is not the task's makes every signature over it invalid at commit:
    /// nothing is committed, nothing slashed, nothing paid out of order.
    function _commitSignedOverAView(
        uint256 id,
        IT.Commitment memory c,
        address[] memory shown,
        uint32 shownCount
    ) internal {
        address[] memory assigned = tasks.minersOf(id);
        bytes[] memory sigs = new bytes[](assigned.length);
        for (uint256 i = 0; i < assigned.length; ++i) {
            sigs[i] = _signDigest(
                _keyOf(assigned[i]), _digestFor(address(tasks), id, shownCount, shown, c, assigned[i])
            );
        }
        vm.prank(coordinator);
        vm.expectPartialRevert(IT.InvalidSignature.selector);
        tasks.commitResults(id, c, sigs);
        assertEq(uint8(_status(id)), uint8(IT.TaskStatus.Assigned), "nothing committed");
        for (uint256 i = 0; i < assigned.length; ++i) {
            assertEq(_free(assigned[i]) + _locked(assigned[i]), MINER_STAKE, "nobody slashed");
        }
        _assertEscrowSolvent();
    }

    /// @dev The review's first finding, fixed: a coordinator (with the owner) shows the honest miners the
    /// assigned miners in another order than on-chain (miners 0 and 1 swapped), so that each finds its own
    /// served root at its slot of that list while on-chain miner 0's slot would hold miner 1's root and line 0
    /// could not be answered. The signatures name the shown order: the commit is refused.
    function test_poc_minerOrderBoundBySignature_noCommitOverAnotherOrder() public {
        uint256 id = _assignedTask(alice, 3);
        ResultLeaf.Leaf[] memory leaves = new ResultLeaf.Leaf[](4);
        leaves[0] = _leaf(id, 0, _one(miners[0]));
        leaves[1] = _leaf(id, 1, _one(miners[1]));
        leaves[2] = _leaf(id, 2, _one(miners[2]));
        leaves[3] = _leaf(id, 3, new address[](0));
        address[] memory view_ = new address[](3);
        (view_[0], view_[1], view_[2]) = (miners[1], miners[0], miners[2]);
        IT.Commitment memory c = _honestCommitment(id, leaves);
        c.servedRoots = ResultTree.servedRoots(leaves, view_); // what the honest miners were shown and checked
        _commitSignedOverAView(id, c, view_, REQUESTS);
    }

    /// @dev The same gap used to take pay: miners 0 and 1 serve the same lines (equal served roots), but miner 0
    /// ran most of the layers; shown the two swapped, miner 0 would find its large share at its slot of the shown
    /// list while on-chain it sits at miner 1's. The signatures name the shown order: the commit is refused.
    function test_poc_minerOrderBoundBySignature_noShareMovedByOrder() public {
        uint256 id = _assignedTask(alice, 3);
        IT.Commitment memory c = _honestCommitment(id, _standardLeaves(id));
        (uint256 big, uint256 small, uint256 rest) = _shares();
        assertEq(c.servedRoots[0], c.servedRoots[1]);
        (c.minerAmounts[0], c.minerAmounts[1], c.minerAmounts[2]) = (small, big, rest);
        address[] memory view_ = new address[](3);
        (view_[0], view_[1], view_[2]) = (miners[1], miners[0], miners[2]);
        _commitSignedOverAView(id, c, view_, REQUESTS);
    }

    /// @dev Shares of the miners' part by work: miner 0 (most layers), miner 1 (few), miner 2 (the rest).
    function _shares() internal pure returns (uint256 big, uint256 small, uint256 rest) {
        uint256 part = PAYMENT - PAYMENT * FEE_BPS / 10_000;
        big = part * 6 / 10;
        small = part / 10;
        rest = part - big - small;
    }

    /// @dev Shown a request count of 3 (and a tree of 3 leaves that holds all of their lines) for a task created
    /// with 4, the honest miners sign a message naming 3: the commit is refused, so no tree no position of
    /// which opens at the task's size can be committed with their signatures.
    function test_poc_requestCountBoundBySignature_noCommitOverAnotherCount() public {
        uint256 id = _assignedTask(alice, 3);
        ResultLeaf.Leaf[] memory standard = _standardLeaves(id);
        ResultLeaf.Leaf[] memory shown = new ResultLeaf.Leaf[](3);
        for (uint256 i = 0; i < 3; ++i) {
            shown[i] = standard[i];
        }
        _commitSignedOverAView(id, _honestCommitment(id, shown), tasks.minersOf(id), 3);
    }
}
