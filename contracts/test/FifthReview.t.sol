// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {BaseTest} from "./BaseTest.sol";
import {ITaskRegistry as IT} from "../src/interfaces/ITaskRegistry.sol";
import {IArbitration as IA} from "../src/interfaces/IArbitration.sol";
import {ResultLeaf} from "../src/libraries/ResultLeaf.sol";

/// @notice Fifth (cold) review of "a won dispute's slash goes, less the jurors' reward, to the audit pool, not to
/// the task owner" (816a1e4). Tests named `test_attack_*` PASS while the attack works; `test_residual_*` pass while
/// a priced residual is as the docs say; `test_defended_*` pass while the defence holds.
///
///  1. A thief of a miner's signer key still cashed part of the lock: the jurors' reward (10% of the slash) goes
///     to the coherent seats, and the thief's own sybil verifier is a coherent seat when it votes the truth (the
///     line the thief signed is wrong); in a model pool the sybil owns, all of it (45 tokens of a 450-token lock).
///     NARROWED: a conviction's juror reward is paid within the pool's daily budget (`auditRewardPerDay`, shared
///     by the whole market), so the thief's sybils take at most that a day, whatever the locks
///     (`test_residual_aLeakedSignerKeysSybilJurorIsPaidAtMostTheDailyBudget`, `..._ThroughAnAudit`,
///     `..._InASharedPool`).
///  2. A miner's lost appeal bond was paid, less the jurors' reward, to the task owner even in an audit, which the
///     owner neither opened nor paid for. FIXED: in an audit it goes to the pool
///     (`test_defended_aMinersLostAuditAppealBondGoesToThePool`).
///  3. Every conviction's slash accrues in the audit pool, whose only open outflow is the admin's (timelocked)
///     `spendAuditPool`: a trusted role, stated in the threat model
///     (`test_residual_theTimelockCanSpendTheSlashOfAConviction`).
///  4. An owner who wins a dispute of a wrong line is paid exactly the task's payment (its refund) over not
///     disputing: on a cheap task that is less than what an undecided round costs it; documented
///     (`test_residual_anOwnersWonDisputeOfACheapTaskPaysLessThanANoDecisionCosts`).
contract FifthReviewTest is BaseTest {
    /// @dev The thief's task: a 450-token maximum price and a 450-token lock, 900 at risk (the cap).
    uint128 internal constant THIEF_PRICE = 450e6;

    address internal sybil = makeAddr("sybil juror");
    address internal sybilAuditor = makeAddr("sybil auditor");

    function setUp() public override {
        super.setUp();
        _registerAll();
    }

    /// @dev Thief (bob) creates a task of `model` (one the victim serves), makes the victim's leaked signer key
    /// consent to the largest lock the task allows, signs with the key a commitment of made-up lines (all
    /// "served" by the victim, so its served root holds each: wrong, as a jury finds) that add up, and commits.
    function _thiefTask(bytes32 model) internal returns (uint256 id, ResultLeaf.Leaf[] memory leaves) {
        return _thiefTaskOf(model, 0);
    }

    /// @dev `_thiefTask` with the leaked key of miner `v`.
    function _thiefTaskOf(bytes32 model, uint256 v)
        internal
        returns (uint256 id, ResultLeaf.Leaf[] memory leaves)
    {
        address victim = miners[v];
        IT.CreateTaskParams memory p = _taskParams(THIEF_PRICE);
        p.modelId = model;
        _fund(bob, address(escrow), THIEF_PRICE);
        vm.prank(bob);
        id = tasks.createTask(p);
        address[] memory list = _one(victim);
        IT.Acceptance[] memory accepted = _acceptances(tasks, id, list, THIEF_PRICE); // the leaked key's
        vm.prank(coordinator);
        tasks.assignTask(id, list, THIEF_PRICE, accepted);
        leaves = new ResultLeaf.Leaf[](REQUESTS);
        for (uint32 i = 0; i < REQUESTS; ++i) {
            leaves[i] = _leaf(id, i, list);
        }
        IT.Commitment memory c = _honestCommitment(id, leaves);
        bytes[] memory sigs = new bytes[](1);
        sigs[0] = _signDigest(signerKeys[v], _digest(id, c, victim));
        vm.prank(bob);
        tasks.commitResults(id, c, sigs);
    }

    function _thiefDispute(uint256 id, ResultLeaf.Leaf[] memory leaves, uint256 line)
        internal
        returns (uint256)
    {
        _fund(bob, address(escrow), DISPUTE_BOND);
        vm.prank(bob);
        return arbitration.openDispute(id, leaves[line], _proofOf(leaves, line), _servedProofs(leaves, line));
    }

    /// @dev The thief's two verifiers, the only ones of OTHER_MODEL, and a bond's worth in the audit pool.
    function _sybilsOfOtherModelAndAPoolBond() internal {
        _registerVerifier(sybil, MIN_VERIFIER_STAKE, _models(OTHER_MODEL));
        _registerVerifier(sybilAuditor, MIN_VERIFIER_STAKE, _models(OTHER_MODEL));
        vm.roll(block.number + 1);
        _fundPool(DISPUTE_BOND);
    }

    function _fundPool(uint256 amount) internal {
        _fund(stranger, address(escrow), amount);
        vm.prank(stranger);
        audits.fundAuditPool(amount);
    }

    // ------------------------------------------------------------------------------------------- attack 1

    function test_residual_aLeakedSignerKeysSybilJurorIsPaidAtMostTheDailyBudget() public {
        // the thief's sybil is the only verifier of OTHER_MODEL, a model the victims serve (the honest verifiers
        // of the test judge MODEL only): a thin pool, the thief's pick
        _registerVerifier(sybil, MIN_VERIFIER_STAKE, _models(OTHER_MODEL));
        vm.roll(block.number + 1);
        (uint256 id, ResultLeaf.Leaf[] memory leaves) = _thiefTask(OTHER_MODEL);
        (uint256 id2, ResultLeaf.Leaf[] memory leaves2) = _thiefTaskOf(OTHER_MODEL, 1); // a second key
        uint256 pool = escrow.auditPool();
        uint256 d = _thiefDispute(id, leaves, 0);
        uint256 d2 = _thiefDispute(id2, leaves2, 0);
        _decideTogether(d, d2, IA.Vote.MinersAtFault); // the truth: the lines are not the model's
        assertEq(_seats(d, 0, sybil), 5, "every seat the sybil's");

        uint256 reward = uint256(THIEF_PRICE) * REWARD_BPS / 10_000;
        assertEq(reward, 45e6, "what a conviction's reward share would be");
        assertEq(escrow.balanceOf(bob), 2 * (THIEF_PRICE + DISPUTE_BOND), "the thief: its own money back");
        // two convictions the same day: 45 tokens, then the 5 left of the day's budget (50 tokens, the market's)
        assertEq(escrow.balanceOf(sybil), AUDIT_REWARD_PER_DAY, "the sybil: the day's budget, no more");
        assertEq(_stake(sybil), MIN_VERIFIER_STAKE, "at no cost to its stake");
        assertEq(_free(miners[0]), MINER_STAKE - THIEF_PRICE, "each victim lost 450 tokens");
        assertEq(_free(miners[1]), MINER_STAKE - THIEF_PRICE);
        assertEq(escrow.auditPool(), pool + 2 * THIEF_PRICE - AUDIT_REWARD_PER_DAY, "the rest pooled");
        _assertEscrowSolvent();
    }

    /// @dev Both disputes' round 0 at once (opened in one block), every juror voting `vote`, resolved in one
    /// block: both resolutions fall on the same day.
    function _decideTogether(uint256 d, uint256 d2, IA.Vote vote) internal {
        address[] memory jury = _drawJury(d);
        address[] memory jury2 = _drawJury(d2);
        for (uint256 i = 0; i < jury.length; ++i) {
            _commitVote(d, jury[i], vote);
        }
        for (uint256 i = 0; i < jury2.length; ++i) {
            _commitVote(d2, jury2[i], vote);
        }
        (, IA.Round memory round) = _round(d);
        vm.warp(round.commitDeadline);
        for (uint256 i = 0; i < jury.length; ++i) {
            _revealVote(d, jury[i], vote);
        }
        for (uint256 i = 0; i < jury2.length; ++i) {
            _revealVote(d2, jury2[i], vote);
        }
        vm.warp(round.appealDeadline);
        arbitration.resolve(d);
        arbitration.resolve(d2);
    }

    function test_residual_aLeakedSignerKeysSybilJurorIsPaidAtMostTheDailyBudgetThroughAnAudit() public {
        _sybilsOfOtherModelAndAPoolBond();
        (uint256 id, ResultLeaf.Leaf[] memory leaves) = _thiefTask(OTHER_MODEL);
        uint256 pool = escrow.auditPool();
        _selectLine(id, 2); // the audit's luck: any line, every one is wrong
        vm.prank(sybilAuditor);
        uint256 d = audits.openAudit(id, leaves[2], _proofOf(leaves, 2), _servedProofs(leaves, 2));
        _decide(d, IA.Vote.MinersAtFault);
        audits.settleAudit(id);

        assertEq(escrow.balanceOf(bob), THIEF_PRICE, "the thief: its escrow back; no bond posted at all");
        assertEq(escrow.balanceOf(sybil), 45e6, "the sybil juror: 10% of the lock");
        assertEq(escrow.balanceOf(sybilAuditor), 0);
        assertEq(_stake(sybilAuditor), MIN_VERIFIER_STAKE, "the auditor's seat back whole");
        assertEq(_free(miners[0]), MINER_STAKE - THIEF_PRICE);
        assertEq(escrow.auditPool(), pool - DISPUTE_BOND + DISPUTE_BOND + THIEF_PRICE - 45e6);
        _assertEscrowSolvent();
    }

    function test_residual_aLeakedSignerKeysSybilJurorIsPaidAtMostTheDailyBudgetInASharedPool() public {
        // a 16-seat sybil beside the four one-seat honest verifiers of MODEL: 80% of the weight, no risk (it
        // votes the truth)
        _registerVerifier(sybil, 16 * MIN_VERIFIER_STAKE);
        vm.roll(block.number + 1);
        (uint256 id, ResultLeaf.Leaf[] memory leaves) = _thiefTask(MODEL);
        uint256 d = _thiefDispute(id, leaves, 1);
        _decide(d, IA.Vote.MinersAtFault); // every juror, honest or not, votes the truth
        uint256 seats = _seats(d, 0, sybil);
        assertEq(seats, 3, "this draw: 3 of 5 seats (80% of the weight expects 4)");
        uint256 perSeat = uint256(THIEF_PRICE) * REWARD_BPS / 10_000 / BASE_JURY; // 9 tokens a seat
        assertEq(escrow.balanceOf(sybil), perSeat * seats, "the sybil: its seats' part of the 45 tokens");
        assertEq(escrow.balanceOf(sybil), 27e6);
        assertEq(escrow.balanceOf(bob), THIEF_PRICE + DISPUTE_BOND);
        _assertEscrowSolvent();
    }

    // ------------------------------------------------------------------------------------------- attack 2

    function test_defended_aMinersLostAuditAppealBondGoesToThePool() public {
        uint256 id = _auditableTask(); // owner alice: say, the sybil of miner 2, whose line 1 is wrong
        _fundPool(DISPUTE_BOND);
        _selectLine(id, 1); // line 1: [m2]
        uint256 d = _openAudit(id, verifiers[0]);
        _runRound(d, IA.Vote.MinersAtFault);
        uint256 bond = _appeal(d, miners[2]); // 10 tokens
        _runRound(d, IA.Vote.MinersAtFault);
        _warpPastAppeal(d);
        arbitration.resolve(d);

        // alice opened nothing and posted nothing: refunded, no share of the appellant's bond (a miner whose
        // sybil owns the task would have appealed audit convictions for 10% of the bond), as an auditor's lost
        // appeal bond goes to the pool
        assertEq(escrow.balanceOf(alice), MAX_PRICE, "the owner: refunded, nothing of m2's bond");
        assertEq(escrow.balanceOf(miners[2]), 0, "the appellant's bond is gone");
        _assertEscrowSolvent();
    }

    // ------------------------------------------------------------------------------------------- attack 3

    function test_residual_theTimelockCanSpendTheSlashOfAConviction() public {
        _registerVerifier(sybil, MIN_VERIFIER_STAKE, _models(OTHER_MODEL));
        vm.roll(block.number + 1);
        (uint256 id, ResultLeaf.Leaf[] memory leaves) = _thiefTask(OTHER_MODEL);
        _decide(_thiefDispute(id, leaves, 0), IA.Vote.MinersAtFault);
        uint256 pool = escrow.auditPool();
        assertEq(pool, THIEF_PRICE - 45e6, "405 tokens of the victim's lock in the pool");
        vm.prank(governor); // after its two-day delay; to any address, any amount within the pool
        escrow.spendAuditPool(governor, pool);
        assertEq(escrow.balanceOf(governor), 405e6);
        assertEq(escrow.auditPool(), 0);
        _assertEscrowSolvent();
    }

    // ------------------------------------------------------------------------------------------- attack 4

    function test_residual_anOwnersWonDisputeOfACheapTaskPaysLessThanANoDecisionCosts() public {
        IT.CreateTaskParams memory p = _taskParams(MAX_PRICE);
        (p.inputPricePerMillion, p.outputPricePerMillion) = (0, 1_000_000); // one unit an output token
        uint256 id = _committedTaskWith(alice, p);
        uint128 payment = tasks.getTask(id).payment;
        assertEq(payment, OUTPUT_TOKENS, "0.654 tokens");
        uint256 d = _openDispute(id, 2); // line 2, [m0, m1, m2]: wrong, as the jury finds
        _decide(d, IA.Vote.MinersAtFault);

        uint256 gain = escrow.balanceOf(alice) - DISPUTE_BOND - (MAX_PRICE - payment); // over not disputing
        assertEq(gain, payment, "the owner's whole upside: the payment");
        uint256 undecided = DISPUTE_BOND * NO_DECISION_FEE_BPS / 10_000;
        assertLt(gain, undecided, "less than the 1 token an undecided round keeps of its bond");
        // before the change it was also paid 27 tokens (90% of three 10-token locks)
        assertEq(escrow.auditPool(), 3 * STAKE_LOCK - 3 * STAKE_LOCK * REWARD_BPS / 10_000);
        _assertEscrowSolvent();
    }

    // ------------------------------------------------------------------------------------------- defended

    /// @dev The thief cannot double the sybil's reward with an audit and its own dispute of the same task: the
    /// first conviction ends the task, the second slashes nothing and pays no reward; nothing is stranded.
    function test_defended_aSecondConvictionOfTheSameTaskPaysNoSecondReward() public {
        _sybilsOfOtherModelAndAPoolBond();
        (uint256 id, ResultLeaf.Leaf[] memory leaves) = _thiefTask(OTHER_MODEL);
        uint256 pool = escrow.auditPool();
        _selectLine(id, 2);
        vm.prank(sybilAuditor);
        uint256 audit = audits.openAudit(id, leaves[2], _proofOf(leaves, 2), _servedProofs(leaves, 2));
        uint256 own = _thiefDispute(id, leaves, 0);
        _decideTogether(audit, own, IA.Vote.MinersAtFault); // both opened in this block; the audit resolved first
        audits.settleAudit(id);

        assertEq(
            escrow.balanceOf(sybil) + escrow.balanceOf(sybilAuditor), 45e6, "10% of one lock, once, for both"
        );
        assertEq(escrow.balanceOf(bob), THIEF_PRICE + DISPUTE_BOND);
        assertEq(escrow.auditPool(), pool + THIEF_PRICE - 45e6);
        assertEq(escrow.arbitrationFloat(), 0);
        assertEq(escrow.escrowOf(id), 0);
        assertEq(_locked(miners[0]), 0);
        assertEq(_lockedOf(sybil), 0);
        assertEq(_lockedOf(sybilAuditor), 0);
        _assertEscrowSolvent();
    }

    /// @dev Sybil jurors cannot drain the pool through audits of correct lines that they acquit: the pool's
    /// juror reward is half a token a bond (capped per day), the sybil auditor's penalty 50 tokens, to the pool.
    function test_defended_acquittedSybilAuditsFeedThePoolRatherThanDrainIt() public {
        _sybilsOfOtherModelAndAPoolBond();
        uint256 id = _committedTaskOf(alice, OTHER_MODEL); // honest lines
        uint256 pool = escrow.auditPool();
        _selectLine(id, 0);
        uint256 d = _openAudit(id, sybilAuditor);
        _decide(d, IA.Vote.MinersCorrect);
        audits.settleAudit(id);

        uint256 jurorReward = DISPUTE_BOND * REWARD_BPS / 10_000;
        uint256 penalty = MIN_VERIFIER_STAKE * PENALTY_BPS / 10_000;
        assertEq(escrow.balanceOf(sybil), jurorReward, "the sybil juror: half a token");
        assertEq(_stake(sybilAuditor), MIN_VERIFIER_STAKE - penalty, "the sybil auditor: 50 tokens lost");
        assertEq(escrow.auditPool(), pool + penalty - jurorReward, "the pool gains 49.5 tokens");
        _assertEscrowSolvent();
    }

    /// @dev The signer key is no party that may appeal, nor may the winning owner: a thief cannot drag its own
    /// conviction into more rounds to raise its sybil's take.
    function test_defended_neitherTheKeyNorTheWinningOwnerAppeals() public {
        _registerVerifier(sybil, MIN_VERIFIER_STAKE, _models(OTHER_MODEL));
        vm.roll(block.number + 1);
        (uint256 id, ResultLeaf.Leaf[] memory leaves) = _thiefTask(OTHER_MODEL);
        uint256 d = _thiefDispute(id, leaves, 0);
        _runRound(d, IA.Vote.MinersAtFault);
        address key = _signer(0);
        _fund(key, address(escrow), 2 * DISPUTE_BOND);
        vm.prank(key);
        vm.expectRevert(abi.encodeWithSelector(IA.NotAParty.selector, d, key));
        arbitration.appeal(d);
        _fund(bob, address(escrow), 2 * DISPUTE_BOND);
        vm.prank(bob);
        vm.expectRevert(abi.encodeWithSelector(IA.AppealByWinner.selector, d, bob));
        arbitration.appeal(d);
    }
}
