// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {BaseTest} from "./BaseTest.sol";
import {ITaskRegistry as IT} from "../src/interfaces/ITaskRegistry.sol";
import {IArbitration as IA} from "../src/interfaces/IArbitration.sol";
import {ResultLeaf} from "../src/libraries/ResultLeaf.sol";

/// @notice Fourth (cold) review of 94a8fb5 (a refutation's and an unanswered challenge's slashed locks go to the
/// audit pool). Tests named `test_attack_*` PASS while the attack works; `test_defended_*` pass while the defence
/// holds.
///
///  1. A thief of a miner's signer key, as owner, cashed the lock it can make the key consent to by disputing a
///     line it signed with the key instead of refuting totals: the dispute paid the challenger the slash less the
///     jurors' reward; through an audit opened by its own sybil verifier it did not even post a bond (the audit
///     pool fronts it). A won dispute now pays no party the slash: the thief gets its escrow and bond back, the
///     jurors their reward, the pool the rest (`test_defended_aLeakedSignerKeyCashesNothingThroughADispute`,
///     `test_defended_aLeakedSignerKeyCashesNothingThroughItsOwnAudit`); the victim still loses the lock.
///  2. A refutation of an overcharged task's totals before an honest owner's dispute of a wrong line is decided
///     took the slash that dispute would have paid the owner; both now pool it, and the owner's payout is the
///     same either way (`test_defended_aRefutationBeforeAWonDisputeChangesNoOnesPayout`).
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

    /// @dev What `jurors` hold in the escrow (they held nothing before the dispute).
    function _paid(address[] memory jurors) internal view returns (uint256 total) {
        for (uint256 i = 0; i < jurors.length; ++i) {
            total += escrow.balanceOf(jurors[i]);
        }
    }

    /// @dev The coherent jurors shared the reward out of `slashed`, less at most a unit of dust per juror.
    function _assertJurorsGotTheirReward(uint256 paid, uint256 slashed) internal pure {
        uint256 reward = slashed * REWARD_BPS / 10_000;
        assertLe(paid, reward, "the jurors: no more than their reward");
        assertGe(paid + BASE_JURY, reward, "the jurors: their reward, less the dust");
    }

    // ------------------------------------------------------------------------------------------- defended 1

    function test_defended_aLeakedSignerKeyCashesNothingThroughADispute() public {
        address victim = miners[0];
        (uint256 id, ResultLeaf.Leaf[] memory leaves, uint128 lock) = _thiefTask();
        uint256 pool = escrow.auditPool();
        _fund(bob, address(escrow), DISPUTE_BOND);
        vm.prank(bob);
        uint256 d = arbitration.openDispute(id, leaves[0], _proofOf(leaves, 0), _servedProofs(leaves, 0));
        uint256 paid = _paid(_decide(d, IA.Vote.MinersAtFault)); // honest jurors: the line is not the model's

        assertEq(
            escrow.balanceOf(bob), MAX_PRICE + DISPUTE_BOND, "the thief: its escrow and bond back, no more"
        );
        _assertJurorsGotTheirReward(paid, lock);
        assertEq(escrow.auditPool(), pool + lock - paid, "the rest of the slash (and the dust): pooled");
        assertEq(
            _free(victim), MINER_STAKE - lock, "the victim lost the lock (griefing, at the thief's cost)"
        );
        _assertEscrowSolvent();
    }

    function test_defended_aLeakedSignerKeyCashesNothingThroughItsOwnAudit() public {
        address victim = miners[0];
        address sybil = verifiers[3]; // the thief's own verifier: not a party of the task
        // the pool holds a bond's worth (from past refutations, or anyone's funding)
        _fund(stranger, address(escrow), DISPUTE_BOND);
        vm.prank(stranger);
        audits.fundAuditPool(DISPUTE_BOND);

        (uint256 id, ResultLeaf.Leaf[] memory leaves, uint128 lock) = _thiefTask();
        uint256 pool = escrow.auditPool();
        _selectLine(id, 2); // the audit's luck, any line: every line the thief built is wrong
        vm.prank(sybil);
        uint256 d = audits.openAudit(id, leaves[2], _proofOf(leaves, 2), _servedProofs(leaves, 2));
        uint256 paid = _paid(_decide(d, IA.Vote.MinersAtFault));
        audits.settleAudit(id);

        assertEq(escrow.balanceOf(bob), MAX_PRICE, "the thief: its escrow back, no more");
        assertEq(escrow.balanceOf(sybil), 0, "the sybil auditor: nothing");
        assertEq(_stake(sybil), MIN_VERIFIER_STAKE, "and its seat back whole");
        _assertJurorsGotTheirReward(paid, lock);
        assertEq(escrow.auditPool(), pool + lock - paid, "the pool: its bond back and the slash's rest");
        assertEq(_free(victim), MINER_STAKE - lock);
        _assertEscrowSolvent();
    }

    // ------------------------------------------------------------------------------------------- defended 2

    function test_defended_aRefutationBeforeAWonDisputeChangesNoOnesPayout() public {
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

        // what the won dispute alone would pay alice: the same, refund and bond (a slash is no party's)
        assertEq(escrow.balanceOf(alice), MAX_PRICE + DISPUTE_BOND, "alice: refund and bond");
        assertEq(escrow.auditPool(), pool + 3 * STAKE_LOCK, "every lock the task held: pooled");
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
