// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {BaseTest} from "./BaseTest.sol";
import {ITaskRegistry as IT} from "../src/interfaces/ITaskRegistry.sol";
import {IArbitration as IA} from "../src/interfaces/IArbitration.sol";
import {ILineChallenges as IL} from "../src/interfaces/ILineChallenges.sol";
import {ResultLeaf} from "../src/libraries/ResultLeaf.sol";
import {ResultTree} from "./utils/ResultTree.sol";

/// @notice Billed lines nobody answers for (second review, class 2) and a results tree of another size than the
/// task (class 10b), written as the attacker's attempts: a coordinator with a colluding miner bills a line no
/// signer's served root holds, or commits a tree whose positions cannot be opened. The owner challenges the
/// position; nobody can answer; the signers lose their locks to the owner, refunded in full, and the miners that
/// did not sign keep everything. Honest commitments answer every challenge and are paid exactly as before.
contract BilledLinesTest is BaseTest {
    uint64 internal constant INFLATED_OUTPUT = 2_000_000;

    function setUp() public override {
        super.setUp();
        _registerAll();
    }

    // ---- helpers

    /// @dev The commitment of `billed` (the leaves the results tree holds) with the served roots of `served` (the
    /// leaves the miners' served trees hold), at `billed`'s usage and price.
    function _commitmentOf(uint256 id, ResultLeaf.Leaf[] memory billed, ResultLeaf.Leaf[] memory served)
        internal
        view
        returns (IT.Commitment memory c)
    {
        c = _honestCommitment(id, billed);
        c.servedRoots = ResultTree.servedRoots(served, tasks.minersOf(id));
    }

    /// @dev The standard leaves with leaf 3 (served by no one, billing nothing) replaced by a well-formed, provable
    /// leaf of 2,000,000 output tokens naming `pipeline`.
    function _inflated(uint256 id, address[] memory pipeline)
        internal
        view
        returns (ResultLeaf.Leaf[] memory leaves)
    {
        leaves = _standardLeaves(id);
        leaves[3] = _leaf(id, 3, pipeline);
        leaves[3].outputTokens = uint32(INFLATED_OUTPUT);
    }

    /// @dev Nobody answered position `index`: after the answer period anyone settles it.
    function _settleUnanswered(uint256 id, uint256 index) internal {
        skip(ANSWER_PERIOD + 1);
        vm.prank(stranger);
        challenges.settleUnanswered(id, index);
        assertEq(uint8(challenges.challengeOf(id, index).status), uint8(IL.ChallengeStatus.Unanswered));
    }

    /// @dev Owner alice was refunded in full, and exactly the locks of the miners in `slashed` (bit i: miner i of
    /// 0..2) went to the audit pool, no party's; every other miner keeps its whole stake, unlocked; nobody was
    /// paid.
    function _assertRefundedAndLocksPooled(uint256 slashed) internal view {
        uint256 count;
        for (uint256 i = 0; i < 3; ++i) {
            bool lost = slashed & (1 << i) != 0;
            if (lost) ++count;
            assertEq(_free(miners[i]), lost ? MINER_STAKE - STAKE_LOCK : MINER_STAKE, "stake");
            assertEq(_locked(miners[i]), 0, "unlocked");
            assertEq(escrow.balanceOf(miners[i]), 0, "unpaid");
        }
        assertEq(escrow.balanceOf(alice), MAX_PRICE, "escrow back, and nothing more");
        assertEq(escrow.balanceOf(feeRecipient), 0, "no fee");
        assertEq(escrow.auditPool(), count * STAKE_LOCK, "the signers' locks");
        _assertEscrowSolvent();
    }

    // ---- class 2: a billed line no signer answers for

    /// @dev The review's attack: coordinator and one colluding miner (miner 0) bill a well-formed leaf of 2,000,000
    /// output tokens that names an honest miner whose served root does not hold it. The honest miners check every
    /// leaf, refuse, and are left out; the colluder alone signs. The owner challenges the line: its leaf is at its
    /// position, but no signer's served root holds it, so no one can answer.
    function test_attack_billedLineNoSignerHolds_unansweredRefundsAndSlashesTheSigner() public {
        uint256 id = _assignedTask(alice, 3);
        ResultLeaf.Leaf[] memory billed = _inflated(id, _pair(miners[1], miners[2]));
        IT.Commitment memory c = _commitmentOf(id, billed, _standardLeaves(id));
        assertEq(c.payment, MAX_PRICE, "the inflated usage bills the maximum price");
        _commitSignedBy(id, c, 1);

        _challenge(id, 3);
        vm.expectRevert(abi.encodeWithSelector(IT.NoAccountableMiner.selector, id, 3));
        _answer(id, billed, 3);
        skip(CHALLENGE_WINDOW);
        vm.expectRevert(_wrongStatus(id, IT.TaskStatus.Disputed, IT.TaskStatus.ResultsCommitted));
        tasks.finalizeTask(id); // held while the challenge is open

        _settleUnanswered(id, 3);
        assertEq(uint8(_status(id)), uint8(IT.TaskStatus.Finalized));
        _assertRefundedAndLocksPooled(1);
    }

    /// @dev The same line naming no one at all (an empty pipeline that still bills tokens).
    function test_attack_billedLineNamingNoOne_unanswered() public {
        uint256 id = _assignedTask(alice, 3);
        ResultLeaf.Leaf[] memory billed = _inflated(id, new address[](0));
        _commitSignedBy(id, _commitmentOf(id, billed, billed), 1);

        _challenge(id, 3);
        vm.expectRevert(abi.encodeWithSelector(IT.NoAccountableMiner.selector, id, 3));
        _answer(id, billed, 3);
        _settleUnanswered(id, 3);
        _assertRefundedAndLocksPooled(1);
    }

    /// @dev Honest miners that sign after checking only their own lines vouched for the whole tree: they are held
    /// to it with the colluder (the miner node checks every leaf before signing, miner/node/signer.py).
    function test_attack_billedLine_everySignerOfTheTreeAnswersForIt() public {
        uint256 id = _assignedTask(alice, 3);
        ResultLeaf.Leaf[] memory billed = _inflated(id, _pair(miners[1], miners[2]));
        _commitSignedBy(id, _commitmentOf(id, billed, _standardLeaves(id)), 7);
        _challenge(id, 3);
        _settleUnanswered(id, 3);
        _assertRefundedAndLocksPooled(7);
    }

    /// @dev The inflated line in the colluder's own served root is answerable, and then accountable: a dispute of
    /// it has the colluder to convict, and the owner keeps the time the challenge was open.
    function test_attack_billedLineTheColluderVouchesFor_isAnsweredThenDisputable() public {
        uint256 id = _assignedTask(alice, 3);
        address[] memory colluderOnly = new address[](1);
        colluderOnly[0] = miners[0];
        ResultLeaf.Leaf[] memory billed = _inflated(id, colluderOnly);
        IT.Commitment memory c = _commitmentOf(id, billed, billed);
        _commitSignedBy(id, c, 1);
        uint256 endsBefore = tasks.challengeEndsAt(id);

        _challenge(id, 3);
        skip(1 hours);
        _answer(id, billed, 3);
        assertEq(uint8(challenges.challengeOf(id, 3).status), uint8(IL.ChallengeStatus.Answered));
        assertEq(uint8(_status(id)), uint8(IT.TaskStatus.ResultsCommitted));
        assertEq(tasks.challengeEndsAt(id), endsBefore + 1 hours, "the owner keeps the time it waited");

        (, address[] memory accountable) =
            tasks.accountableFor(id, billed[3], _proofOf(billed, 3), _servedProofs(billed, 3));
        assertEq(accountable.length, 1);
        assertEq(accountable[0], miners[0], "a dispute of the line holds the colluder to account");
    }

    // ---- class 10(b): a tree of another size than the task

    /// @dev A tree one leaf larger than the request count commits, but none of its positions can be opened at
    /// the task's size: the first challenge goes unanswered.
    function test_attack_treeOneLeafLarger_unanswered() public {
        uint256 id = _assignedTask(alice, 3);
        ResultLeaf.Leaf[] memory standard = _standardLeaves(id);
        ResultLeaf.Leaf[] memory larger = new ResultLeaf.Leaf[](REQUESTS + 1);
        for (uint256 i = 0; i < REQUESTS; ++i) {
            larger[i] = standard[i];
        }
        larger[REQUESTS] = _leaf(id, REQUESTS, _pair(miners[0], miners[1]));
        IT.Commitment memory c = _honestCommitment(id, larger);
        _commitSignedBy(id, c, 7);

        _challenge(id, 0);
        vm.expectRevert(IT.InvalidProof.selector);
        _answer(id, larger, 0);
        vm.expectRevert(abi.encodeWithSelector(IL.IndexOutOfRange.selector, REQUESTS, REQUESTS));
        _challenge(id, REQUESTS);
        _settleUnanswered(id, 0);
        _assertRefundedAndLocksPooled(7);
    }

    /// @dev A tree one leaf smaller: its last position cannot be opened.
    function test_attack_treeOneLeafSmaller_unanswered() public {
        uint256 id = _assignedTask(alice, 3);
        ResultLeaf.Leaf[] memory standard = _standardLeaves(id);
        ResultLeaf.Leaf[] memory smaller = new ResultLeaf.Leaf[](REQUESTS - 1);
        for (uint256 i = 0; i < REQUESTS - 1; ++i) {
            smaller[i] = standard[i];
        }
        _commitSignedBy(id, _honestCommitment(id, smaller), 7);
        _challenge(id, REQUESTS - 1);
        _settleUnanswered(id, REQUESTS - 1);
        _assertRefundedAndLocksPooled(7);
    }

    // ---- honest commitments

    /// @dev Every position of an honest tree is answered by anyone holding the leaves, a line that bills nothing
    /// without a served proof; the task then finalizes and pays exactly, its window extended by the longest wait.
    function test_honestTree_everyChallengeAnswered_paidExactly() public {
        uint256 id = _committedTask(alice);
        ResultLeaf.Leaf[] memory leaves = _standardLeaves(id);
        uint256 endsBefore = tasks.challengeEndsAt(id);
        for (uint256 i = 0; i < REQUESTS; ++i) {
            _challenge(id, i);
        }
        skip(2 hours);
        for (uint256 i = 0; i < REQUESTS; ++i) {
            _answer(id, leaves, i);
        }
        assertEq(tasks.challengeEndsAt(id), endsBefore + 2 hours, "the task was held once, for 2 hours");
        assertEq(challenges.challengedLinesOf(id).length, REQUESTS);
        _assertPaid(id, _signedWork(id));
    }

    /// @dev Refusals: only the owner challenges, inside the window, inside the tree, once per position, at most
    /// MAX_CHALLENGES times; only an open challenge is answered (before its deadline, with a proof of its own
    /// position) or settled (after it); a task not committed cannot be challenged.
    function test_refusals() public {
        uint256 id = _committedTask(alice);
        ResultLeaf.Leaf[] memory leaves = _standardLeaves(id);

        vm.prank(coordinator);
        vm.expectRevert(abi.encodeWithSelector(IL.NotTaskOwner.selector, id, coordinator));
        challenges.challengeLine(id, 0);
        vm.expectRevert(abi.encodeWithSelector(IL.IndexOutOfRange.selector, REQUESTS, REQUESTS));
        _challenge(id, REQUESTS);
        vm.expectRevert(abi.encodeWithSelector(IL.NotOpen.selector, id, 0));
        _answer(id, leaves, 0);
        vm.expectRevert(abi.encodeWithSelector(IL.NotOpen.selector, id, 0));
        challenges.settleUnanswered(id, 0);

        _challenge(id, 0);
        vm.expectRevert(abi.encodeWithSelector(IL.AlreadyChallenged.selector, id, 0, IL.ChallengeStatus.Open));
        _challenge(id, 0);
        uint256 answerBy = challenges.challengeOf(id, 0).answerBy;
        vm.expectRevert(abi.encodeWithSelector(IL.AnswerPeriodNotOver.selector, id, 0, answerBy));
        challenges.settleUnanswered(id, 0);
        // another position, a leaf altered, served proofs that prove nothing
        vm.expectRevert(abi.encodeWithSelector(IL.NotOpen.selector, id, 1));
        _answer(id, leaves, 1);
        ResultLeaf.Leaf[] memory altered = _standardLeaves(id);
        altered[0].outputTokens += 1;
        vm.expectRevert(IT.InvalidProof.selector);
        challenges.answerLine(id, altered[0], _proofOf(leaves, 0), _servedProofs(leaves, 0));
        vm.expectRevert(abi.encodeWithSelector(IT.NoAccountableMiner.selector, id, 0));
        challenges.answerLine(id, leaves[0], _proofOf(leaves, 0), new bytes32[][](2));

        _answer(id, leaves, 0);
        vm.expectRevert(
            abi.encodeWithSelector(IL.AlreadyChallenged.selector, id, 0, IL.ChallengeStatus.Answered)
        );
        _challenge(id, 0);

        _challenge(id, 1);
        skip(ANSWER_PERIOD + 1);
        vm.expectRevert(
            abi.encodeWithSelector(IL.AnswerTooLate.selector, id, 1, challenges.challengeOf(id, 1).answerBy)
        );
        _answer(id, leaves, 1);

        uint256 endsAt = tasks.challengeEndsAt(id);
        vm.warp(endsAt);
        vm.expectRevert(abi.encodeWithSelector(IL.ChallengeWindowClosed.selector, id, endsAt));
        _challenge(id, 2);

        uint256 assigned = _assignedTask(alice, 3);
        vm.expectRevert(abi.encodeWithSelector(IL.ChallengeWindowClosed.selector, assigned, 0));
        _challenge(assigned, 0);
    }

    /// @dev An owner cannot hold a task's miners to answer without end: at most MAX_CHALLENGES positions.
    function test_challengesPerTaskAreBounded() public {
        uint256 count = challenges.MAX_CHALLENGES() + 1;
        IT.CreateTaskParams memory p = _taskParams(MAX_PRICE);
        p.requestCount = uint32(count);
        _fund(alice, address(escrow), MAX_PRICE);
        vm.prank(alice);
        uint256 id = tasks.createTask(p);
        _assign(id, _miners(3));
        ResultLeaf.Leaf[] memory leaves = new ResultLeaf.Leaf[](count);
        for (uint32 i = 0; i < count; ++i) {
            leaves[i] = _leaf(id, i, _pair(miners[0], miners[1]));
        }
        _commitLeaves(id, leaves);
        for (uint256 i = 0; i < count - 1; ++i) {
            _challenge(id, i);
            _answer(id, leaves, i);
        }
        vm.expectRevert(abi.encodeWithSelector(IL.TooManyChallenges.selector, id, count - 1));
        _challenge(id, count - 1);
    }

    /// @dev A dispute decided "miners correct" while a challenge is open does not settle the task: the unanswered
    /// challenge still refunds it; and a verdict against the miners first leaves nothing for the challenge to
    /// move twice.
    function test_challengeAndDisputeTogether_moveMoneyOnce() public {
        uint256 id = _committedTask(alice);
        _challenge(id, 3);
        uint256 disputeId = _openDispute(id, 0);
        _decide(disputeId, IA.Vote.MinersCorrect);
        assertEq(uint8(_status(id)), uint8(IT.TaskStatus.Disputed), "held by the open challenge");
        uint256 ownerAfterDispute = escrow.balanceOf(alice);
        // its miners never answer for leaf 3 (it bills nothing: any of them could have)
        _settleUnanswered(id, 3);
        assertEq(uint8(_status(id)), uint8(IT.TaskStatus.Finalized));
        assertEq(escrow.balanceOf(alice), ownerAfterDispute + MAX_PRICE, "the escrow back; the locks pooled");
        _assertEscrowSolvent();

        uint256 second = _committedTask(alice);
        _challenge(second, 2);
        uint256 convicting = _openDispute(second, 0);
        _decide(convicting, IA.Vote.MinersAtFault);
        assertEq(uint8(_status(second)), uint8(IT.TaskStatus.Finalized));
        uint256 ownerAfterVerdict = escrow.balanceOf(alice);
        uint256 pool = escrow.auditPool();
        _settleUnanswered(second, 2);
        assertEq(escrow.balanceOf(alice), ownerAfterVerdict, "refunded once, by the verdict");
        assertEq(escrow.auditPool(), pool);
        _assertEscrowSolvent();
    }
}
