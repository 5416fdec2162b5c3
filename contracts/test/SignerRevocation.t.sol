// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {BaseTest} from "./BaseTest.sol";
import {ITaskRegistry as IT} from "../src/interfaces/ITaskRegistry.sol";
import {ResultLeaf} from "../src/libraries/ResultLeaf.sol";
import {ResultTree} from "./utils/ResultTree.sol";

/// @notice A thief holding a miner's leaked signer key, with a coordinator and an owner on its side, against a
/// miner that revoked that key for its open task: the key's signature and its on-chain vouch are refused, its
/// standing vouch is dropped, a refutation takes nothing from the miner, and the miner's own account can still
/// vouch and be paid.
contract SignerRevocationTest is BaseTest {
    address internal victim;
    address internal partner;

    function setUp() public override {
        super.setUp();
        _registerAll();
        victim = miners[0];
        partner = miners[1];
    }

    /// @dev Four lines: the first two served by the victim, the last two by its partner.
    function _task() internal returns (uint256 id, ResultLeaf.Leaf[] memory leaves) {
        id = _assignedTask(alice, 2);
        leaves = new ResultLeaf.Leaf[](4);
        for (uint32 i = 0; i < 4; ++i) {
            leaves[i] = _leaf(id, i, _one(i < 2 ? victim : partner));
        }
    }

    /// @dev The honest commitment of `leaves` with 1,000 output tokens more than they add up to.
    function _overstated(uint256 id, ResultLeaf.Leaf[] memory leaves)
        internal
        view
        returns (IT.Commitment memory c)
    {
        c = _honestCommitment(id, leaves);
        c.outputTokens += 1_000;
        c.payment = tasks.priceOf(id, c.inputTokens, c.outputTokens);
        c.minerAmounts = _split(c.payment - _fee(c.payment), 2);
    }

    function _revoke(uint256 id) internal {
        vm.prank(victim);
        tasks.revokeSigner(id);
    }

    function test_attack_aRevokedSignersSignatureCommitsNothing() public {
        (uint256 id, ResultLeaf.Leaf[] memory leaves) = _task();
        IT.Commitment memory lie = _overstated(id, leaves);
        _revoke(id);
        assertEq(tasks.revokedMaskOf(id), 1);
        assertEq(tasks.signersOf(id)[0], _signer(0), "the old key stays the task's party");

        bytes[] memory sigs = new bytes[](2);
        sigs[0] = _signDigest(signerKeys[0], _digest(id, lie, victim)); // the thief's
        sigs[1] = _signDigest(signerKeys[1], _digest(id, lie, partner)); // the colluding partner's
        vm.prank(coordinator);
        vm.expectRevert(abi.encodeWithSelector(IT.SignerRevoked.selector, id, _signer(0)));
        tasks.commitResults(id, lie, sigs);

        // what is left to the coordinator: the lie with the victim left out (signed by the partner alone);
        // anyone refutes it with one line, and only the partner answers for it
        _commitSignedBy(id, lie, 2);
        assertEq(tasks.signedMaskOf(id), 2);
        uint256 pool = escrow.auditPool();
        vm.prank(stranger);
        tasks.refuteUsage(id, leaves[0], _proofOf(leaves, 0));
        assertEq(_free(victim), MINER_STAKE, "the victim keeps its whole stake");
        assertEq(_locked(victim), 0);
        assertEq(_free(partner), MINER_STAKE - STAKE_LOCK);
        assertEq(_locked(partner), 0);
        assertEq(escrow.balanceOf(alice), MAX_PRICE, "the owner: its escrow back");
        assertEq(escrow.auditPool(), pool + STAKE_LOCK, "the partner's lock");
        _assertEscrowSolvent();
    }

    function test_attack_aRevokedSignersVouchIsDroppedAndRefused() public {
        (uint256 id, ResultLeaf.Leaf[] memory leaves) = _task();
        IT.Commitment memory lie = _overstated(id, leaves);
        vm.prank(_signer(0)); // the thief vouches before the miner notices
        tasks.vouchResults(id, lie);
        vm.prank(partner);
        tasks.vouchResults(id, lie);
        _revoke(id);
        assertEq(tasks.vouchesOf(id)[0], bytes32(0), "the thief's vouch is gone");
        vm.prank(_signer(0));
        vm.expectRevert(abi.encodeWithSelector(IT.SignerRevoked.selector, id, _signer(0)));
        tasks.vouchResults(id, lie);
        bytes[] memory empty = new bytes[](2);
        vm.prank(stranger);
        vm.expectRevert(abi.encodeWithSelector(IT.UnpaidShareRequired.selector, victim));
        tasks.commitResults(id, lie, empty); // the partner's vouch alone does not carry the victim's slot

        // the dropped vouch does not reopen the release: the work is still the miners'
        vm.prank(coordinator);
        tasks.requestRelease(id);
        vm.warp(block.timestamp + tasks.RELEASE_NOTICE());
        vm.prank(coordinator);
        vm.expectRevert(abi.encodeWithSelector(IT.TaskVouched.selector, id));
        tasks.releaseTask(id);

        // the victim's own account vouches for the true results, the partner too; anyone commits them
        IT.Commitment memory truth = _honestCommitment(id, leaves);
        vm.prank(victim);
        tasks.vouchResults(id, truth);
        vm.prank(partner);
        tasks.vouchResults(id, truth);
        vm.prank(stranger);
        tasks.commitResults(id, truth, empty);
        assertEq(tasks.signedMaskOf(id), 3);
        vm.warp(tasks.challengeEndsAt(id));
        tasks.finalizeTask(id);
        assertEq(escrow.balanceOf(victim), truth.minerAmounts[0], "the victim is paid its share");
        assertEq(_free(victim), MINER_STAKE);
        assertEq(_locked(victim), 0);
        _assertEscrowSolvent();
    }

    function test_attack_onlyTheMinersOwnAccountRevokesAndOnlyBeforeTheCommit() public {
        (uint256 id, ResultLeaf.Leaf[] memory leaves) = _task();
        vm.prank(stranger);
        vm.expectRevert(abi.encodeWithSelector(IT.NotAssignedMiner.selector, id, stranger));
        tasks.revokeSigner(id);
        vm.prank(_signer(0)); // the key itself (a thief) cannot revoke it to leave the miner out
        vm.expectRevert(abi.encodeWithSelector(IT.NotAssignedMiner.selector, id, _signer(0)));
        tasks.revokeSigner(id);
        vm.prank(miners[2]); // a miner of the market not assigned to this task
        vm.expectRevert(abi.encodeWithSelector(IT.NotAssignedMiner.selector, id, miners[2]));
        tasks.revokeSigner(id);

        _commitLeaves(id, leaves);
        vm.prank(victim); // committed: who signed is final
        vm.expectRevert(
            abi.encodeWithSelector(
                IT.WrongStatus.selector, id, IT.TaskStatus.ResultsCommitted, IT.TaskStatus.Assigned
            )
        );
        tasks.revokeSigner(id);
        assertEq(tasks.revokedMaskOf(id), 0);
    }

    function test_aRevocationReachesOnlyItsTaskAndItsMiner() public {
        (uint256 id, ResultLeaf.Leaf[] memory leaves) = _task();
        (uint256 other, ResultLeaf.Leaf[] memory otherLeaves) = _task();
        _revoke(id);
        assertEq(tasks.revokedMaskOf(other), 0);
        _commitLeaves(other, otherLeaves); // the key still signs the miner's other task
        assertEq(tasks.signedMaskOf(other), 3);
        IT.Commitment memory truth = _honestCommitment(id, leaves);
        bytes[] memory sigs = new bytes[](2);
        sigs[1] = _signDigest(signerKeys[1], _digest(id, truth, partner));
        vm.prank(victim);
        tasks.vouchResults(id, truth);
        vm.prank(coordinator);
        tasks.commitResults(id, truth, sigs); // the partner's key is untouched
        assertEq(tasks.signedMaskOf(id), 3);
        _assertEscrowSolvent();
    }
}
