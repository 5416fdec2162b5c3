// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {BaseTest} from "./BaseTest.sol";
import {ITaskRegistry as IT} from "../src/interfaces/ITaskRegistry.sol";
import {IArbitration as IA} from "../src/interfaces/IArbitration.sol";
import {ResultLeaf} from "../src/libraries/ResultLeaf.sol";
import {ResultTree} from "./utils/ResultTree.sol";

/// @notice The second security review's attacks (issue "trust layer against a second audit"), each written as the
/// attacker's attempt: it fails, and every honest party ends with exactly what it is owed.
contract SecondReviewTest is BaseTest {
    function setUp() public override {
        super.setUp();
        _registerAll();
    }

    // ---- 1. framing through refutation

    /// @dev Overstated totals that only `signers` of the task's miners sign; the others' signatures are left
    /// empty (paid nothing, vouching for nothing), as a coordinator may for a spare or a miner gone for good.
    function _overstatedSignedBy(uint256 id, ResultLeaf.Leaf[] memory leaves, uint256 signers)
        internal
        returns (IT.Commitment memory c)
    {
        c = _honestCommitment(id, leaves);
        c.outputTokens += 2_000_000;
        c.payment = tasks.priceOf(id, c.inputTokens, c.outputTokens);
        _commitSignedBy(id, c, (1 << signers) - 1);
    }

    /// @dev Coordinator, owner and a sybil miner: the sybil alone signs overstated totals, the victim's signature
    /// is left empty, and the owner refutes to collect every lock. Only the signer's lock is taken; the victim
    /// is unlocked with its whole stake, and the owner gets its escrow and the signer's lock, nothing more.
    function test_attack_refutationSlashesOnlySigners_victimLeftOut() public {
        uint256 id = _assignedTask(alice, 2);
        ResultLeaf.Leaf[] memory leaves = new ResultLeaf.Leaf[](REQUESTS);
        for (uint32 i = 0; i < REQUESTS; ++i) {
            address[] memory sybilOnly = new address[](1);
            sybilOnly[0] = miners[0];
            leaves[i] = _leaf(id, i, sybilOnly);
        }
        _overstatedSignedBy(id, leaves, 1);
        assertEq(tasks.signedMaskOf(id), 1, "only the sybil signed");

        vm.expectEmit(address(tasks));
        (uint64 inputTokens, uint64 outputTokens) = ResultTree.usage(leaves);
        emit IT.UsageRefuted(id, inputTokens, outputTokens, STAKE_LOCK);
        uint256 pool = escrow.auditPool();
        vm.prank(alice);
        tasks.refuteUsage(id, leaves[0], _proofOf(leaves, 0));

        assertEq(_free(miners[1]), MINER_STAKE, "the victim keeps its whole stake");
        assertEq(_locked(miners[1]), 0, "and it is unlocked");
        assertEq(_free(miners[0]), MINER_STAKE - STAKE_LOCK, "the signer loses its lock");
        assertEq(_locked(miners[0]), 0);
        assertEq(escrow.balanceOf(alice), MAX_PRICE, "the escrow back, and no lock: the framers gain nothing");
        assertEq(escrow.auditPool(), pool + STAKE_LOCK, "the signer's lock only");
        assertEq(escrow.balanceOf(miners[0]) + escrow.balanceOf(miners[1]), 0);
        assertEq(escrow.balanceOf(feeRecipient), 0);
        _assertEscrowSolvent();
    }

    /// @dev The same with a spare (assigned, served nothing) and a middle miner left out: of four, two sign.
    function test_attack_refutationSlashesOnlySigners_spareAndGone() public {
        uint256 id = _assignedTask(alice, 4);
        ResultLeaf.Leaf[] memory leaves = new ResultLeaf.Leaf[](REQUESTS);
        for (uint32 i = 0; i < REQUESTS; ++i) {
            leaves[i] = _leaf(id, i, _pair(miners[0], miners[1]));
        }
        _overstatedSignedBy(id, leaves, 2);
        uint256 pool = escrow.auditPool();
        vm.prank(stranger);
        tasks.refuteUsage(id, leaves[3], _proofOf(leaves, 3));
        for (uint256 i = 0; i < 4; ++i) {
            assertEq(_free(miners[i]), i < 2 ? MINER_STAKE - STAKE_LOCK : MINER_STAKE);
            assertEq(_locked(miners[i]), 0);
        }
        assertEq(escrow.balanceOf(alice), MAX_PRICE);
        assertEq(escrow.auditPool(), pool + 2 * STAKE_LOCK, "the two signers' locks");
        _assertEscrowSolvent();
    }

    // ---- 9. served, signed work cancelled unpaid

    /// @dev Coordinator and owner take the outputs off chain and release the task at once, before any miner can
    /// react: an Assigned task is released only after a notice, which the miners use to vouch on-chain for what
    /// they signed; the release is then refused for good, a miner commits, and everyone is paid exactly.
    function test_attack_releaseAfterSignedWorkIsStoppedByTheMinersVouches() public {
        uint256 id = _assignedTask(alice, 3);
        IT.Commitment memory c = _signedWork(id);
        vm.prank(coordinator);
        vm.expectRevert(abi.encodeWithSelector(IT.ReleaseNotDue.selector, id, 0));
        tasks.releaseTask(id);
        vm.prank(coordinator);
        tasks.requestRelease(id);
        _vouchAll(id, c); // during the notice
        skip(tasks.RELEASE_NOTICE());
        vm.prank(coordinator);
        vm.expectRevert(abi.encodeWithSelector(IT.TaskVouched.selector, id));
        tasks.releaseTask(id);

        vm.prank(miners[2]);
        tasks.commitResults(id, c, new bytes[](3)); // every slot stands on its miner's vouch
        assertEq(tasks.signedMaskOf(id), 7);
        _assertPaid(id, c);
    }

    /// @dev A coordinator that simply never commits: the miners commit what they all signed themselves, with the
    /// signatures they hold or their on-chain vouches, mixed; a stranger may send it too.
    function test_attack_withheldCommitIsMadeByTheMiners() public {
        uint256 id = _assignedTask(alice, 3);
        IT.Commitment memory c = _signedWork(id);
        bytes[] memory sigs = _signatures(id, c);
        vm.prank(miners[1]);
        tasks.vouchResults(id, c);
        sigs[1] = "";
        vm.prank(stranger);
        tasks.commitResults(id, c, sigs);
        _assertPaid(id, c);
    }

    /// @dev Without the coordinator, no miner can leave another out: a commitment that pays a miner nothing needs
    /// that miner's signature or vouch too, and a vouch for one commitment does not stand for another.
    function test_attack_minersCannotCommitWithoutEveryMiner() public {
        uint256 id = _assignedTask(alice, 3);
        IT.Commitment memory c = _signedWork(id);
        IT.Commitment memory twoOnly = _signedWork(id);
        twoOnly.minerAmounts = _split(c.payment - _fee(c.payment), 2);
        twoOnly.minerAmounts = _append(twoOnly.minerAmounts, 0);
        twoOnly.servedRoots[2] = bytes32(0);
        bytes[] memory sigs = _signatures(id, twoOnly);
        sigs[2] = "";
        vm.prank(miners[0]);
        vm.expectRevert(abi.encodeWithSelector(IT.NotFullySigned.selector, id, 3));
        tasks.commitResults(id, twoOnly, sigs);

        _vouchAll(id, c); // all vouched for the honest commitment, not for this one
        IT.Commitment memory shifted = _signedWork(id);
        shifted.minerAmounts[0] += shifted.minerAmounts[2];
        shifted.minerAmounts[2] = 0;
        vm.prank(miners[0]);
        vm.expectRevert(abi.encodeWithSelector(IT.VouchedOtherResults.selector, miners[0]));
        tasks.commitResults(id, shifted, new bytes[](3));

        vm.prank(miners[0]);
        tasks.commitResults(id, c, new bytes[](3));
        _assertPaid(id, c);
    }

    /// @dev Only an assigned miner or the signer it accepted the task with vouches, only while the task is
    /// Assigned, with one served root per miner; only its own coordinator announces a release.
    function test_vouchAndReleaseRequestRefusals() public {
        uint256 id = _assignedTask(alice, 3);
        IT.Commitment memory c = _signedWork(id);
        vm.prank(stranger);
        vm.expectRevert(abi.encodeWithSelector(IT.NotAssignedMiner.selector, id, stranger));
        tasks.vouchResults(id, c);
        vm.prank(miners[3]);
        vm.expectRevert(abi.encodeWithSelector(IT.NotAssignedMiner.selector, id, miners[3]));
        tasks.vouchResults(id, c);
        IT.Commitment memory short = _signedWork(id);
        short.servedRoots = new bytes32[](2);
        vm.prank(miners[0]);
        vm.expectRevert(abi.encodeWithSelector(IT.LengthMismatch.selector, 3, 2));
        tasks.vouchResults(id, short);
        vm.prank(stranger);
        vm.expectRevert(abi.encodeWithSelector(IT.NotTaskCoordinator.selector, id, stranger));
        tasks.requestRelease(id);

        vm.expectEmit(address(tasks));
        emit IT.ResultsVouched(id, miners[0], tasks.commitmentDigest(id, c, miners[0]), c.servedRoots[0]);
        vm.prank(miners[0]);
        tasks.vouchResults(id, c);
        assertEq(tasks.vouchesOf(id)[0], _digest(id, c, miners[0]), "the digest its signature signs");
        assertEq(tasks.vouchesOf(id)[1], bytes32(0));

        _commit(id, c);
        vm.prank(miners[1]);
        vm.expectRevert(_wrongStatus(id, IT.TaskStatus.ResultsCommitted, IT.TaskStatus.Assigned));
        tasks.vouchResults(id, c);
        vm.prank(coordinator);
        vm.expectRevert(_wrongStatus(id, IT.TaskStatus.ResultsCommitted, IT.TaskStatus.Assigned));
        tasks.requestRelease(id);
    }

    /// @dev The residual, priced: one assigned miner's vouch stops a release even when nothing else was signed,
    /// so a miner can keep the owner's escrow until the task's deadline (its own lock waits as long); the owner
    /// then gets every unit back and the miners are unlocked.
    function test_aLoneVouchOnlyDelaysTheRefundToTheDeadline() public {
        uint256 id = _assignedTask(alice, 3);
        IT.Commitment memory c = _signedWork(id);
        vm.prank(miners[0]);
        tasks.vouchResults(id, c);
        _releaseRefusedAfterNotice(id);
        vm.warp(uint256(tasks.getTask(id).deadline) + 1);
        tasks.expireTask(id);
        _assertRefundedInFull();
    }

    function _append(uint256[] memory list, uint256 item) internal pure returns (uint256[] memory longer) {
        longer = new uint256[](list.length + 1);
        for (uint256 i = 0; i < list.length; ++i) {
            longer[i] = list[i];
        }
        longer[list.length] = item;
    }

    // ---- 8. parties fixed at assignment

    /// @dev A miner points its signer at a verifier after accepting a task: the commitment must still carry the
    /// signature of the signer it accepted with (the new one's is refused), and the task keeps that signer.
    function test_attack_signerChangedAfterAcceptanceSignsNothing() public {
        uint256 id = _assignedTask(alice, 3);
        address accepted = _signer(0);
        vm.prank(miners[0]);
        registry.setSigner(verifiers[0]);
        assertEq(tasks.signersOf(id)[0], accepted, "the task keeps the signer that accepted it");

        ResultLeaf.Leaf[] memory leaves = _standardLeaves(id);
        IT.Commitment memory c = _commitment(_rootOf(leaves), PAYMENT, 3);
        c.servedRoots = ResultTree.servedRoots(leaves, tasks.minersOf(id));
        bytes[] memory sigs = _signatures(id, c); // the accepting signers' keys
        (, uint256 verifierKey) = makeAddrAndKey("a verifier's key");
        bytes[] memory forged = _signatures(id, c);
        forged[0] = _signDigest(verifierKey, _digest(id, c, miners[0]));
        vm.startPrank(coordinator);
        vm.expectRevert(abi.encodeWithSelector(IT.InvalidSignature.selector, miners[0], vm.addr(verifierKey)));
        tasks.commitResults(id, c, forged);
        tasks.commitResults(id, c, sigs);
        vm.stopPrank();
        assertEq(tasks.signedMaskOf(id), 7);
    }

    /// @dev A cheating miner, once its line is disputed, points its signer at the verifier that holds all the
    /// weight, to make it a party and keep it off the jury. Parties are fixed at assignment: the verifier is
    /// still drawn.
    function test_attack_signerChangeCannotKeepAVerifierOffTheJury() public {
        address whale = makeAddr("whale");
        _registerVerifier(whale, 1_000 * MIN_VERIFIER_STAKE);
        vm.roll(block.number + 1);
        uint256 id = _committedTask(alice);
        uint256 d = _openDispute(id, 0);
        vm.prank(miners[0]);
        registry.setSigner(whale);
        address[] memory jurors = _drawJury(d);
        assertTrue(_in(jurors, whale), "the whale was drawn though the miner named it its signer");
    }

    /// @dev A cheating miner points its signer at each honest auditor just before it opens its audit: the auditor
    /// is no party to a task assigned before, and opens the audit.
    function test_attack_signerChangeCannotRefuseAnAuditor() public {
        _setAuditRate(10_000);
        address auditor = verifiers[1];
        uint256 id = _committedTask(alice);
        uint256 line = _selectedAudit(id);
        vm.prank(miners[2]);
        registry.setSigner(auditor);
        ResultLeaf.Leaf[] memory leaves = _standardLeaves(id);
        vm.prank(auditor);
        uint256 d = audits.openAudit(id, leaves[line], _proofOf(leaves, line), _servedProofs(leaves, line));
        assertTrue(arbitration.getDispute(d).audit);
    }
}
