// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {BaseTest} from "./BaseTest.sol";
import {ITaskRegistry as IT} from "../src/interfaces/ITaskRegistry.sol";
import {IArbitration as IA} from "../src/interfaces/IArbitration.sol";
import {ResultLeaf} from "../src/libraries/ResultLeaf.sol";

/// @notice Fourth (cold) review of 94a8fb5 (a refutation's and an unanswered challenge's slashed locks go to the
/// audit pool). Tests named `test_attack_*` / `test_residual_*` PASS while the attack works; `test_defended_*`
/// pass while the defence holds.
///
///  1. A thief of a miner's signer key, as owner, still cashes the lock it can make the key consent to: it
///     disputes a line it signed with the key instead of refuting totals. The dispute pays the challenger the
///     slash less the jurors' reward (`test_residual_aLeakedSignerKeyCashesTheLockThroughADispute`); through an
///     audit opened by its own sybil verifier it does not even post a bond: the audit pool (fed now by the
///     victims' own slashed locks) fronts it (`test_residual_aLeakedSignerKeyCashesTheLockThroughItsOwnAudit`).
///  2. An honest owner who disputes a wrong line of an overcharged task loses the slash the dispute would pay it
///     when anyone refutes the totals first: the refutation ends the task, the locks go to the pool, and the won
///     dispute pays only the bond back (`test_attack_aStrangersRefutationTakesTheOwnersWonSlash`).
///  3. Accounting: a donation, an open line challenge and an owner's dispute on the same task as a refutation
///     strand nothing and leave no float (`test_defended_aRefutationWithEveryProceedingOpenStrandsNothing`).
contract FourthReviewTest is BaseTest {
    function setUp() public override {
        super.setUp();
        _registerAll();
    }

    /// @dev Thief (bob) owns a one-line-per-request task, makes the victim's leaked signer key consent at the largest
    /// lock the task allows and sign the task's commitment, commits it itself (fully signed), and returns the
    /// leaves it built (every line "served" by the victim alone, so the victim's served root holds each).
    function _thiefTask() internal returns (uint256 id, ResultLeaf.Leaf[] memory leaves, uint128 lock) {
        address victim = miners[0];
        id = _createTask(bob, MAX_PRICE);
        address[] memory list = _one(victim);
        lock = MAX_PRICE; // max(maxPrice, minStakeLock)
        IT.Acceptance[] memory accepted = _acceptances(tasks, id, list, lock); // the leaked key's
        vm.prank(coordinator); // the coordinator assigns on a valid consent, as it must
        tasks.assignTask(id, list, lock, accepted);

        leaves = new ResultLeaf.Leaf[](REQUESTS);
        for (uint32 i = 0; i < REQUESTS; ++i) {
            leaves[i] = _leaf(id, i, list); // outputs the victim never produced: wrong, as a jury will find
        }
        IT.Commitment memory c = _honestCommitment(id, leaves); // totals that add up: nothing to refute
        bytes[] memory sigs = new bytes[](1);
        sigs[0] = _signDigest(signerKeys[0], _digest(id, c, victim)); // the thief's signature with the key
        vm.prank(bob);
        tasks.commitResults(id, c, sigs);

        vm.prank(victim); // the miner's revocation cannot come after a commit
        vm.expectRevert(_wrongStatus(id, IT.TaskStatus.ResultsCommitted, IT.TaskStatus.Assigned));
        tasks.revokeSigner(id);
    }

    // ------------------------------------------------------------------------------------------- attack 1

    function test_residual_aLeakedSignerKeyCashesTheLockThroughADispute() public {
        address victim = miners[0];
        (uint256 id, ResultLeaf.Leaf[] memory leaves, uint128 lock) = _thiefTask();
        uint256 spent = MAX_PRICE + DISPUTE_BOND; // all the thief ever put in
        _fund(bob, address(escrow), DISPUTE_BOND);
        vm.prank(bob);
        uint256 d = arbitration.openDispute(id, leaves[0], _proofOf(leaves, 0), _servedProofs(leaves, 0));
        _decide(d, IA.Vote.MinersAtFault); // honest jurors: the line is not the model's output

        uint256 gain = escrow.balanceOf(bob) - spent;
        assertEq(gain, lock - lock * REWARD_BPS / 10_000, "the thief nets 90% of the victim's lock");
        assertEq(gain, 90e6);
        assertEq(_free(victim), MINER_STAKE - lock, "the victim lost the lock");
        _assertEscrowSolvent();
    }

    function test_residual_aLeakedSignerKeyCashesTheLockThroughItsOwnAudit() public {
        address victim = miners[0];
        address sybil = verifiers[3]; // the thief's own verifier: not a party of the task
        // the pool holds a bond's worth (from past refutations, or anyone's funding)
        _fund(stranger, address(escrow), DISPUTE_BOND);
        vm.prank(stranger);
        audits.fundAuditPool(DISPUTE_BOND);

        (uint256 id, ResultLeaf.Leaf[] memory leaves, uint128 lock) = _thiefTask();
        _selectLine(id, 2); // the audit's luck, any line: every line the thief built is wrong
        vm.prank(sybil);
        uint256 d = audits.openAudit(id, leaves[2], _proofOf(leaves, 2), _servedProofs(leaves, 2));
        _decide(d, IA.Vote.MinersAtFault);
        audits.settleAudit(id);

        assertEq(
            escrow.balanceOf(bob),
            MAX_PRICE + lock - lock * REWARD_BPS / 10_000,
            "escrow back + 90% of the lock"
        );
        assertEq(_stake(sybil), MIN_VERIFIER_STAKE, "the sybil auditor loses nothing");
        assertEq(_free(victim), MINER_STAKE - lock);
        _assertEscrowSolvent();
    }

    // ------------------------------------------------------------------------------------------- attack 2

    function test_attack_aStrangersRefutationTakesTheOwnersWonSlash() public {
        (uint256 id, ResultLeaf.Leaf[] memory leaves) = _overchargedTask(100_000);
        // line 0 is also wrong (as the jury finds): alice disputes it, its pipeline [m0, m1]
        _fund(alice, address(escrow), DISPUTE_BOND);
        vm.prank(alice);
        uint256 d = arbitration.openDispute(id, leaves[0], _proofOf(leaves, 0), _servedProofs(leaves, 0));
        assertEq(arbitration.pipelineOf(d).length, 2);

        uint256 pool = escrow.auditPool();
        vm.prank(stranger); // anyone, e.g. a sore miner of the task: no bond, no cost but gas
        tasks.refuteUsage(id, leaves[2], _proofOf(leaves, 2));
        _decide(d, IA.Vote.MinersAtFault);

        uint256 owed = 2 * (STAKE_LOCK - STAKE_LOCK * REWARD_BPS / 10_000); // what the won dispute pays alone
        assertEq(escrow.balanceOf(alice), MAX_PRICE + DISPUTE_BOND, "alice: refund and bond only");
        assertEq(escrow.auditPool(), pool + 3 * STAKE_LOCK, "the locks alice's verdict would pay: pooled");
        assertGt(owed, 0);
        _assertEscrowSolvent();
    }

    // ------------------------------------------------------------------------------------------- defended 3

    function test_defended_aRefutationWithEveryProceedingOpenStrandsNothing() public {
        (uint256 id, ResultLeaf.Leaf[] memory leaves) = _overchargedTask(100_000);
        _challenge(id, 1);
        _fund(alice, address(escrow), DISPUTE_BOND);
        vm.prank(alice);
        uint256 d = arbitration.openDispute(id, leaves[0], _proofOf(leaves, 0), _servedProofs(leaves, 0));
        _mint(stranger, 7);
        vm.prank(stranger);
        token.transfer(address(escrow), 7); // a donation
        uint256 pool = escrow.auditPool();
        vm.prank(stranger);
        tasks.refuteUsage(id, leaves[2], _proofOf(leaves, 2));
        assertEq(escrow.auditPool(), pool + 3 * STAKE_LOCK + 7);

        skip(ANSWER_PERIOD + 1);
        challenges.settleUnanswered(id, 1); // nothing more to slash
        _decide(d, IA.Vote.MinersCorrect); // even a wrong acquittal pays out of the bond, not the pool
        assertEq(escrow.arbitrationFloat(), 0);
        assertEq(tasks.openDisputesOf(id), 0);
        assertEq(escrow.escrowOf(id), 0);
        _assertEscrowSolvent();
        for (uint256 i = 0; i < 3; ++i) {
            assertEq(_locked(miners[i]), 0);
            assertEq(_free(miners[i]), MINER_STAKE - STAKE_LOCK, "slashed once");
        }
    }
}
