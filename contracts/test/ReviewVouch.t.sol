// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {BaseTest} from "./BaseTest.sol";
import {ITaskRegistry as IT} from "../src/interfaces/ITaskRegistry.sol";
import {ResultLeaf} from "../src/libraries/ResultLeaf.sol";
import {ResultTree} from "./utils/ResultTree.sol";

/// @notice A cold review of the release / vouch / commit lifecycle (issue 36 class 9), kept as regression tests.
/// Each test is the attacker's attempt. Most assert the refusal and that the honest parties end with exactly what
/// they are owed; two residuals that still work assert the outcome and say `// RESIDUAL:` (docs/security.md
/// prices them).
contract ReviewVouchTest is BaseTest {
    /// @dev The standard leaves' payment split three ways (fee taken), dust to the first.
    uint256 internal constant FEE = 3_888_888;
    uint256 internal constant SHARE_0 = 24_629_631;
    uint256 internal constant SHARE = 24_629_629;

    function setUp() public override {
        super.setUp();
        _registerAll();
    }

    // ------------------------------------------------------------------------------------------ helpers

    function _copy(IT.Commitment memory c) internal pure returns (IT.Commitment memory d) {
        d = IT.Commitment({
            resultsRoot: c.resultsRoot,
            inputTokens: c.inputTokens,
            outputTokens: c.outputTokens,
            payment: c.payment,
            minerAmounts: new uint256[](c.minerAmounts.length),
            servedRoots: new bytes32[](c.servedRoots.length)
        });
        for (uint256 i = 0; i < c.minerAmounts.length; ++i) {
            d.minerAmounts[i] = c.minerAmounts[i];
        }
        for (uint256 i = 0; i < c.servedRoots.length; ++i) {
            d.servedRoots[i] = c.servedRoots[i];
        }
    }

    function _vouch(uint256 id, uint256 i, IT.Commitment memory c) internal {
        vm.prank(miners[i]);
        tasks.vouchResults(id, c);
    }

    /// @dev `c` with every miner's pay moved to miner 0 and every other slot emptied (no amount, no served
    /// root): what a coordinator may commit with miner 0's signature alone.
    function _allToMiner0(IT.Commitment memory c) internal pure returns (IT.Commitment memory d) {
        d = _copy(c);
        uint256 total;
        for (uint256 i = 0; i < d.minerAmounts.length; ++i) {
            total += d.minerAmounts[i];
            d.minerAmounts[i] = 0;
            if (i != 0) d.servedRoots[i] = bytes32(0);
        }
        d.minerAmounts[0] = total;
    }

    function _onlyMiner0Signs(uint256 id, IT.Commitment memory c)
        internal
        view
        returns (bytes[] memory sigs)
    {
        sigs = new bytes[](c.minerAmounts.length);
        sigs[0] = _signDigest(_keyOf(miners[0]), _digest(id, c, miners[0]));
    }

    /// @dev After the challenge window: every miner its honest share (the literal amounts), the coordinator its
    /// fee, the owner the rest.
    function _assertHonestSettlement(uint256 id) internal {
        IT.Commitment memory c = _signedWork(id);
        assertEq(c.payment, PAYMENT);
        assertEq(_fee(c.payment), FEE);
        assertEq(c.minerAmounts[0], SHARE_0);
        assertEq(c.minerAmounts[1], SHARE);
        assertEq(c.minerAmounts[2], SHARE);
        _assertPaid(id, c);
    }

    // ====================================== attacks that succeeded against the first version, now refused

    /// @dev Coordinator + one colluding (sybil) miner, after all three miners served, signed and vouched on-chain
    /// for the honest commitment: the coordinator commits (first, or front-running the miners' own commit) the
    /// same root with every share moved to its sybil and the honest slots emptied. Refused: a miner that vouched
    /// is never left out; the miners' own commit then pays everyone exactly.
    function test_poc_coordinatorDropsVouchedMiners() public {
        uint256 id = _assignedTask(alice, 3);
        IT.Commitment memory c = _signedWork(id);
        _vouchAll(id, c);
        IT.Commitment memory grab = _allToMiner0(c);
        bytes[] memory sigs = _onlyMiner0Signs(id, grab);
        vm.prank(coordinator);
        vm.expectRevert(abi.encodeWithSelector(IT.VouchedOtherResults.selector, miners[1]));
        tasks.commitResults(id, grab, sigs);
        vm.prank(miners[1]);
        tasks.commitResults(id, c, new bytes[](3));
        _assertHonestSettlement(id);
    }

    /// @dev Owner + coordinator + sybil miner try to get the batch for free: commit the real root with usage off
    /// by one, signed by the sybil alone with the vouched honest slots emptied, then refute. The commit is
    /// refused (a vouched miner is never left out), so there is nothing to refute; everyone is paid exactly.
    function test_poc_ownerCoordinatorSybilRefuteForFreeWork() public {
        uint256 id = _assignedTask(alice, 3);
        IT.Commitment memory c = _signedWork(id);
        _vouchAll(id, c);
        IT.Commitment memory lie = _allToMiner0(c);
        lie.outputTokens += 1;
        lie.payment = tasks.priceOf(id, lie.inputTokens, lie.outputTokens);
        lie.minerAmounts[0] = lie.payment - _fee(lie.payment);
        bytes[] memory sigs = _onlyMiner0Signs(id, lie);
        vm.prank(coordinator);
        vm.expectRevert(abi.encodeWithSelector(IT.VouchedOtherResults.selector, miners[1]));
        tasks.commitResults(id, lie, sigs);
        vm.prank(stranger);
        tasks.commitResults(id, c, new bytes[](3));
        _assertHonestSettlement(id);
    }

    /// @dev The coordinator asks to release right after assignment, so that the notice has run out by the time
    /// the miners hand over their signatures, and releases in the next transaction. Refused: an announcement is
    /// ripe for one notice only, then stale; a new one gives the miners an hour to vouch, which stops it.
    function test_poc_staleReleaseRequestCancelsSignedWork() public {
        uint256 id = _assignedTask(alice, 3);
        vm.prank(coordinator);
        tasks.requestRelease(id);
        uint256 releaseAt = tasks.releaseAtOf(id);
        skip(3 hours);
        IT.Commitment memory c = _signedWork(id);
        vm.prank(coordinator);
        vm.expectRevert(abi.encodeWithSelector(IT.ReleaseNotDue.selector, id, releaseAt));
        tasks.releaseTask(id);

        vm.prank(coordinator);
        tasks.requestRelease(id); // stale: a new notice starts
        assertEq(tasks.releaseAtOf(id), block.timestamp + tasks.RELEASE_NOTICE());
        _vouchAll(id, c);
        skip(tasks.RELEASE_NOTICE());
        vm.prank(coordinator);
        vm.expectRevert(abi.encodeWithSelector(IT.TaskVouched.selector, id));
        tasks.releaseTask(id);
        vm.prank(miners[0]);
        tasks.commitResults(id, c, new bytes[](3));
        _assertHonestSettlement(id);
    }

    /// @dev Owner + coordinator with a sybil (or merely offline) miner in the set. The honest miners vouch, which
    /// stops a release, but they can never commit without the sybil's vouch, and no miner-side commit may leave
    /// a slot empty. The coordinator never commits; the task expires and the owner is refunded in full.
    function test_poc_sybilWithholdsVouchTaskExpiresUnpaid() public {
        uint256 id = _assignedTask(alice, 3);
        IT.Commitment memory c = _signedWork(id);
        _vouch(id, 1, c);
        _vouch(id, 2, c);

        vm.prank(miners[1]);
        vm.expectRevert(abi.encodeWithSelector(IT.UnpaidShareRequired.selector, miners[0]));
        tasks.commitResults(id, c, new bytes[](3));

        // Dropping the silent miner and re-vouching does not help: only a coordinator may leave a slot empty.
        IT.Commitment memory without0 = _copy(c);
        without0.minerAmounts[1] += without0.minerAmounts[0];
        without0.minerAmounts[0] = 0;
        without0.servedRoots[0] = bytes32(0);
        _vouch(id, 1, without0);
        _vouch(id, 2, without0);
        vm.prank(miners[1]);
        vm.expectRevert(abi.encodeWithSelector(IT.NotFullySigned.selector, id, 6));
        tasks.commitResults(id, without0, new bytes[](3));

        vm.warp(uint256(tasks.getTask(id).deadline) + 1);
        tasks.expireTask(id);
        // RESIDUAL: honest miners 1 and 2 lose 49,259,258 of served, vouched work; the owner pays 0.
        _assertRefundedInFull();
    }

    /// @dev A second COORDINATOR_ROLE holder commits a partially signed commitment on a task it never assigned,
    /// with one colluding miner's signature. Refused: only the task's own coordinator leaves a slot empty.
    function test_poc_foreignCoordinatorCommitsPartialOnAnyTask() public {
        address coordinator2 = makeAddr("coordinator2");
        bytes32 role = tasks.COORDINATOR_ROLE();
        vm.prank(governor);
        tasks.grantRole(role, coordinator2);
        uint256 id = _assignedTask(alice, 3); // assigned by `coordinator`
        IT.Commitment memory c = _signedWork(id);
        IT.Commitment memory grab = _allToMiner0(c);
        bytes[] memory sigs = _onlyMiner0Signs(id, grab);
        vm.prank(coordinator2);
        vm.expectRevert(abi.encodeWithSelector(IT.NotFullySigned.selector, id, 1));
        tasks.commitResults(id, grab, sigs);
        vm.prank(coordinator2);
        vm.expectRevert(abi.encodeWithSelector(IT.NotTaskCoordinator.selector, id, coordinator2));
        tasks.requestRelease(id);
        _vouchAll(id, c);
        vm.prank(coordinator2);
        tasks.commitResults(id, c, new bytes[](3)); // what everyone vouched for: anyone may send it
        _assertHonestSettlement(id);
    }

    /// @dev Griefing, the known residual priced at its worst: one assigned miner vouches for anything (here a
    /// commitment no one can commit: it pays the others) on a task with the longest deadline. The owner cannot
    /// cancel, the coordinator cannot release, and the two other miners' locks are held just as long.
    function test_poc_loneVouchLocksEscrowAndOthersStake90Days() public {
        _fund(alice, address(escrow), MAX_PRICE);
        IT.CreateTaskParams memory p = _taskParams(MAX_PRICE);
        p.deadline = uint64(block.timestamp + tasks.MAX_TASK_DURATION());
        vm.prank(alice);
        uint256 id = tasks.createTask(p);
        _assign(id, _miners(3));

        IT.Commitment memory junk = _signedWork(id);
        junk.resultsRoot = keccak256("junk");
        _vouch(id, 0, junk);

        _releaseRefusedAfterNotice(id);
        vm.prank(alice);
        vm.expectRevert(_wrongStatus(id, IT.TaskStatus.Assigned, IT.TaskStatus.Open));
        tasks.cancelTask(id);
        // The coordinator cannot commit the griefer's vouch to end it (the others' slots are paid).
        vm.prank(coordinator);
        vm.expectRevert(abi.encodeWithSelector(IT.UnpaidShareRequired.selector, miners[1]));
        tasks.commitResults(id, junk, new bytes[](3));

        vm.warp(p.deadline);
        vm.expectRevert(abi.encodeWithSelector(IT.DeadlineNotPassed.selector, id, p.deadline));
        tasks.expireTask(id);
        // RESIDUAL (griefing): 100,000,000 of escrow and 2 x 10,000,000 of honest stake locked for 90 days, for
        // the price of one vouch transaction and the griefer's own lock held as long.
        assertEq(_locked(miners[1]), STAKE_LOCK);
        assertEq(_locked(miners[2]), STAKE_LOCK);
        assertEq(escrow.balanceOf(alice), 0);

        skip(1);
        tasks.expireTask(id);
        _assertRefundedInFull();
    }

    // ============================================================================== attacks that FAIL

    /// @dev After every miner vouched, a stranger (or a miner) tries to commit a variant: shares shifted, served
    /// roots swapped, a served root dropped, usage changed. Each slot's vouch is the digest over the whole
    /// commitment, every served root included, so every variant is refused at the first slot; the honest
    /// commitment then pays exactly.
    function test_poc_strangerCannotCommitVariantOfFullyVouched() public {
        uint256 id = _assignedTask(alice, 3);
        IT.Commitment memory c = _signedWork(id);
        _vouchAll(id, c);

        IT.Commitment memory shifted = _copy(c);
        shifted.minerAmounts[0] += 1;
        shifted.minerAmounts[1] -= 1;
        vm.prank(stranger);
        vm.expectRevert(abi.encodeWithSelector(IT.VouchedOtherResults.selector, miners[0]));
        tasks.commitResults(id, shifted, new bytes[](3));

        IT.Commitment memory swapped = _copy(c);
        (swapped.servedRoots[1], swapped.servedRoots[2]) = (c.servedRoots[2], c.servedRoots[1]);
        vm.prank(stranger);
        vm.expectRevert(abi.encodeWithSelector(IT.VouchedOtherResults.selector, miners[0]));
        tasks.commitResults(id, swapped, new bytes[](3));

        IT.Commitment memory dropped = _copy(c);
        dropped.servedRoots[2] = bytes32(0);
        vm.prank(miners[0]);
        vm.expectRevert(abi.encodeWithSelector(IT.VouchedOtherResults.selector, miners[0]));
        tasks.commitResults(id, dropped, new bytes[](3));

        IT.Commitment memory inflated = _copy(c);
        inflated.outputTokens += 100;
        inflated.payment = tasks.priceOf(id, inflated.inputTokens, inflated.outputTokens);
        inflated.minerAmounts = _split(inflated.payment - _fee(inflated.payment), 3);
        vm.prank(stranger);
        vm.expectRevert(abi.encodeWithSelector(IT.VouchedOtherResults.selector, miners[0]));
        tasks.commitResults(id, inflated, new bytes[](3));

        vm.prank(stranger);
        tasks.commitResults(id, c, new bytes[](3));
        assertEq(tasks.signedMaskOf(id), 7);
        skip(CHALLENGE_WINDOW);
        tasks.finalizeTask(id);
        assertEq(escrow.balanceOf(miners[0]), SHARE_0);
        assertEq(escrow.balanceOf(miners[1]), SHARE);
        assertEq(escrow.balanceOf(miners[2]), SHARE);
        assertEq(escrow.balanceOf(feeRecipient), FEE);
        assertEq(escrow.balanceOf(alice), MAX_PRICE - PAYMENT);
        _assertEscrowSolvent();
    }

    /// @dev Vouches and signatures of one task replayed on another task with the same miners and the same
    /// commitment fields: the digest binds the task id, so neither counts.
    function test_poc_vouchAndSignatureReplayAcrossTasks() public {
        uint256 id1 = _assignedTask(alice, 3);
        uint256 id2 = _assignedTask(bob, 3);
        IT.Commitment memory c = _signedWork(id1);
        _vouchAll(id1, c);
        bytes[] memory sigs1 = _signatures(id1, c);

        vm.prank(stranger);
        vm.expectRevert(abi.encodeWithSelector(IT.UnpaidShareRequired.selector, miners[0]));
        tasks.commitResults(id2, c, new bytes[](3));

        (uint8 v, bytes32 r, bytes32 s) = vm.sign(_keyOf(miners[0]), _digest(id1, c, miners[0]));
        address recovered = ecrecover(_digest(id2, c, miners[0]), v, r, s);
        vm.prank(coordinator);
        vm.expectRevert(abi.encodeWithSelector(IT.InvalidSignature.selector, miners[0], recovered));
        tasks.commitResults(id2, c, sigs1);

        assertEq(tasks.vouchesOf(id2).length, 0, "no vouch leaked to task 2");
        // Task 2 still releases after its notice: task 1's vouches do not hold it.
        vm.prank(coordinator);
        tasks.requestRelease(id2);
        skip(tasks.RELEASE_NOTICE());
        vm.prank(coordinator);
        tasks.releaseTask(id2);
        assertEq(escrow.balanceOf(bob), MAX_PRICE);
        // Task 1 pays exactly.
        vm.prank(stranger);
        tasks.commitResults(id1, c, new bytes[](3));
        skip(CHALLENGE_WINDOW);
        tasks.finalizeTask(id1);
        assertEq(escrow.balanceOf(miners[0]), SHARE_0);
        assertEq(escrow.balanceOf(miners[1]) + escrow.balanceOf(miners[2]), 2 * SHARE);
        assertEq(escrow.balanceOf(alice), MAX_PRICE - PAYMENT);
        _assertEscrowSolvent();
    }

    /// @dev Signer changes and colliding digests. Miner 1 points its registered signer at miner 0's accepted
    /// signer: that key's vouch still lands on miner 0's slot only. Miner 2 rotates to a new key: the new key
    /// cannot vouch, the accepted one still can. Miners 0 and 1 serve the very same lines (equal served roots,
    /// so equal vouch digests): miner 0's vouch does not fill miner 1's slot.
    function test_poc_signerChangeAndDigestCollisionDoNotRedirectVouches() public {
        uint256 id = _assignedTask(alice, 3);
        ResultLeaf.Leaf[] memory leaves = new ResultLeaf.Leaf[](REQUESTS);
        for (uint32 i = 0; i < REQUESTS; ++i) {
            leaves[i] = _leaf(id, i, _pair(miners[0], miners[1]));
        }
        (uint64 inputTokens, uint64 outputTokens) = ResultTree.usage(leaves);
        uint128 payment = tasks.priceOf(id, inputTokens, outputTokens);
        IT.Commitment memory c = IT.Commitment({
            resultsRoot: _rootOf(leaves),
            inputTokens: inputTokens,
            outputTokens: outputTokens,
            payment: payment,
            minerAmounts: _split(payment - _fee(payment), 3),
            servedRoots: ResultTree.servedRoots(leaves, tasks.minersOf(id))
        });
        assertEq(c.servedRoots[0], c.servedRoots[1], "same lines, same served root");
        assertTrue(_digest(id, c, miners[0]) != _digest(id, c, miners[1]), "the digest names the miner");

        address signer0 = _signer(0);
        vm.prank(miners[1]);
        registry.setSigner(signer0);
        address fresh = makeAddr("fresh signer");
        vm.prank(miners[2]);
        registry.setSigner(fresh);

        vm.prank(fresh);
        vm.expectRevert(abi.encodeWithSelector(IT.NotAssignedMiner.selector, id, fresh));
        tasks.vouchResults(id, c);

        vm.prank(signer0);
        tasks.vouchResults(id, c);
        vm.prank(_signer(2)); // the key miner 2 accepted with still speaks for it
        tasks.vouchResults(id, c);
        bytes32[] memory vouches = tasks.vouchesOf(id);
        assertEq(vouches[0], _digest(id, c, miners[0]));
        assertEq(vouches[1], bytes32(0), "miner 1's slot stays empty");
        assertEq(vouches[2], _digest(id, c, miners[2]));

        vm.prank(stranger);
        vm.expectRevert(abi.encodeWithSelector(IT.UnpaidShareRequired.selector, miners[1]));
        tasks.commitResults(id, c, new bytes[](3));
        // Miner 0's key cannot sign for miner 1 either, though it is now miner 1's registered signer.
        bytes[] memory sigs = new bytes[](3);
        sigs[1] = _signDigest(signerKeys[0], _digest(id, c, miners[1]));
        vm.prank(stranger);
        vm.expectRevert(abi.encodeWithSelector(IT.InvalidSignature.selector, miners[1], signer0));
        tasks.commitResults(id, c, sigs);

        _vouch(id, 1, c); // miner 1 itself
        vm.prank(stranger);
        tasks.commitResults(id, c, new bytes[](3));
        skip(CHALLENGE_WINDOW);
        tasks.finalizeTask(id);
        for (uint256 i = 0; i < 3; ++i) {
            assertEq(escrow.balanceOf(miners[i]), c.minerAmounts[i]);
            assertEq(_locked(miners[i]), 0);
        }
        assertEq(escrow.balanceOf(alice), MAX_PRICE - payment);
        _assertEscrowSolvent();
    }

    /// @dev Transitions that must be impossible: vouch on an Open task; release of a committed task; a release
    /// request or vouch after commit; commit after the deadline by anyone (a miner with every vouch, the
    /// coordinator); expiry at the deadline second, when a fully vouched commit still goes through.
    function test_poc_outOfOrderTransitionsRefused() public {
        // Open task: nothing to vouch for, and no assigned miners.
        uint256 open = _createTask(bob, MAX_PRICE);
        IT.Commitment memory c0 = _signedWork(open);
        vm.prank(miners[0]);
        vm.expectRevert(_wrongStatus(open, IT.TaskStatus.Open, IT.TaskStatus.Assigned));
        tasks.vouchResults(open, c0);

        // Committed task: cannot be released, re-requested or vouched.
        uint256 id = _assignedTask(alice, 3);
        IT.Commitment memory c = _signedWork(id);
        _vouchAll(id, c);
        uint64 deadline = tasks.getTask(id).deadline;
        vm.warp(deadline);
        vm.expectRevert(abi.encodeWithSelector(IT.DeadlineNotPassed.selector, id, deadline));
        tasks.expireTask(id);
        vm.prank(miners[2]);
        tasks.commitResults(id, c, new bytes[](3)); // at the deadline second: still in time
        vm.prank(coordinator);
        vm.expectRevert(_wrongStatus(id, IT.TaskStatus.ResultsCommitted, IT.TaskStatus.Open));
        tasks.releaseTask(id);
        vm.prank(coordinator);
        vm.expectRevert(_wrongStatus(id, IT.TaskStatus.ResultsCommitted, IT.TaskStatus.Assigned));
        tasks.requestRelease(id);
        vm.expectRevert(_wrongStatus(id, IT.TaskStatus.ResultsCommitted, IT.TaskStatus.Assigned));
        tasks.expireTask(id);

        // Late task: nobody commits after its deadline, not even the coordinator.
        vm.warp(T0 + 1 days);
        uint256 late = _assignedTask(bob, 3);
        IT.Commitment memory cl = _signedWork(late);
        _vouchAll(late, cl);
        bytes[] memory sigs = _signatures(late, cl);
        uint64 lateDeadline = tasks.getTask(late).deadline;
        vm.warp(uint256(lateDeadline) + 1);
        vm.prank(miners[0]);
        vm.expectRevert(abi.encodeWithSelector(IT.DeadlinePassed.selector, late, lateDeadline));
        tasks.commitResults(late, cl, new bytes[](3));
        vm.prank(coordinator);
        vm.expectRevert(abi.encodeWithSelector(IT.DeadlinePassed.selector, late, lateDeadline));
        tasks.commitResults(late, cl, sigs);
        tasks.expireTask(late);
        vm.prank(miners[0]);
        vm.expectRevert(_wrongStatus(late, IT.TaskStatus.Expired, IT.TaskStatus.Assigned));
        tasks.vouchResults(late, cl);

        // Balances: the committed task pays exactly, the late one refunds bob in full.
        tasks.finalizeTask(id); // its challenge window ended long ago
        assertEq(escrow.balanceOf(miners[0]), SHARE_0);
        assertEq(escrow.balanceOf(miners[1]), SHARE);
        assertEq(escrow.balanceOf(miners[2]), SHARE);
        assertEq(escrow.balanceOf(alice), MAX_PRICE - PAYMENT);
        assertEq(escrow.balanceOf(bob), MAX_PRICE, "late task refunded; the open one still escrowed");
        for (uint256 i = 0; i < 3; ++i) {
            assertEq(_locked(miners[i]), 0);
        }
        _assertEscrowSolvent();
    }

    /// @dev Paid twice: a second commit (coordinator or miner), a second finalize, a refutation or an expiry after
    /// settlement, a release after settlement. All refused; every balance exact.
    function test_poc_noDoublePayment() public {
        uint256 id = _assignedTask(alice, 3);
        ResultLeaf.Leaf[] memory leaves = _standardLeaves(id);
        IT.Commitment memory c = _signedWork(id);
        bytes[] memory sigs = _signatures(id, c);
        _vouchAll(id, c);
        vm.prank(miners[0]);
        tasks.commitResults(id, c, new bytes[](3));

        vm.prank(coordinator);
        vm.expectRevert(_wrongStatus(id, IT.TaskStatus.ResultsCommitted, IT.TaskStatus.Assigned));
        tasks.commitResults(id, c, sigs);

        skip(CHALLENGE_WINDOW);
        tasks.finalizeTask(id);
        vm.expectRevert(_wrongStatus(id, IT.TaskStatus.Finalized, IT.TaskStatus.ResultsCommitted));
        tasks.finalizeTask(id);
        bytes32[] memory proof = _proofOf(leaves, 1);
        vm.expectRevert(_wrongStatus(id, IT.TaskStatus.Finalized, IT.TaskStatus.ResultsCommitted));
        tasks.refuteUsage(id, leaves[1], proof);
        vm.expectRevert(_wrongStatus(id, IT.TaskStatus.Finalized, IT.TaskStatus.Assigned));
        tasks.expireTask(id);
        vm.prank(coordinator);
        vm.expectRevert(_wrongStatus(id, IT.TaskStatus.Finalized, IT.TaskStatus.Open));
        tasks.releaseTask(id);

        assertEq(escrow.balanceOf(miners[0]), SHARE_0);
        assertEq(escrow.balanceOf(miners[1]), SHARE);
        assertEq(escrow.balanceOf(miners[2]), SHARE);
        assertEq(escrow.balanceOf(feeRecipient), FEE);
        assertEq(escrow.balanceOf(alice), MAX_PRICE - PAYMENT);
        _assertEscrowSolvent();
    }
}
