// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {Math} from "@openzeppelin/contracts/utils/math/Math.sol";
import {BaseTest} from "./BaseTest.sol";
import {IArbitration as IA} from "../src/interfaces/IArbitration.sol";
import {ITaskRegistry} from "../src/interfaces/ITaskRegistry.sol";
import {IVerifierRegistry as IV} from "../src/interfaces/IVerifierRegistry.sol";

/// @notice A cold review of juries per model (one sortition per model hash), by a reviewer that did not write
/// them, kept as tests. `test_attack_*`: attacks that worked until the fix they led to (a round 0 that can seat
/// nobody now ends at once, undecided, at no fee to the owner, and counts as an abandoned audit for its opener;
/// seats are drawn by weight whatever other disputes locked); `test_defended_*`: ideas the code already
/// defended.
contract ReviewPoolsTest is BaseTest {
    IA.Vote internal constant CORRECT = IA.Vote.MinersCorrect;
    IA.Vote internal constant AT_FAULT = IA.Vote.MinersAtFault;

    address internal cartelOwner = makeAddr("cartelOwner");

    function setUp() public override {
        super.setUp();
        _registerAll();
    }

    // ------------------------------------------------------------------------------------------------ helpers

    /// @dev A task of `model` for `maxPrice` at `pricePerMillion` (both token kinds), owned by `owner`, assigned to
    /// miners 0..2, standard leaves committed honestly.
    function _taskOf(address owner, bytes32 model, uint128 maxPrice, uint128 pricePerMillion)
        internal
        returns (uint256)
    {
        ITaskRegistry.CreateTaskParams memory p = _taskParams(maxPrice);
        p.modelId = model;
        p.inputPricePerMillion = pricePerMillion;
        p.outputPricePerMillion = pricePerMillion;
        return _committedTaskWith(owner, p);
    }

    function _minerShare(uint256 i) internal pure returns (uint256) {
        return _split(PAYMENT - _fee(PAYMENT), 3)[i];
    }

    // ============================================================================ 1. the owner's pool check

    /// @dev `totalWeight(model)` counts the weight of the task's own parties: here OTHER_MODEL's whole pool is the
    /// coordinator's and miner 2's signer's registrations (15 seats). Alice sees 15 seats, pays, gets a wrong line
    /// from miner 2, disputes it: every seat is cut as a party and the jury is empty. Before the fix the round ran
    /// its three phases and ended NoDecision, and miner 2 took 20% of Alice's bond besides its pay. Now the round
    /// ends at once and Alice's bond comes back whole. What is left (documented): an unjudgeable task's line is
    /// paid as committed; the owner reads the pool's weight without the parties'.
    function test_attack_partiesOwnTheWholePool_theOwnerLosesNoBond() public {
        _registerVerifier(coordinator, 10 * MIN_VERIFIER_STAKE, _models(OTHER_MODEL));
        _registerVerifier(_signer(2), 5 * MIN_VERIFIER_STAKE, _models(OTHER_MODEL));
        vm.roll(block.number + 1);
        assertEq(verifierRegistry.totalWeight(OTHER_MODEL), 15, "what the honest owner reads: 15 seats");

        uint256 id = _committedTaskOf(alice, OTHER_MODEL);
        uint256 d = _openDispute(id, 1); // miner 2's (wrong) line
        assertEq(arbitration.roundOf(d, 0).weightTotal, 15);
        uint256 openedAt = block.timestamp;
        address[] memory jurors = _drawJury(d);
        assertEq(jurors.length, 0, "no juror: every seat of the pool belongs to a party");
        assertEq(arbitration.roundOf(d, 0).appealDeadline, block.timestamp, "the empty round ends at once");
        arbitration.resolve(d);
        assertEq(uint8(_statusOf(d)), uint8(IA.DisputeStatus.NoDecision));
        assertLt(block.timestamp - openedAt, VOTING_PERIOD, "the task was held no phase");
        assertEq(
            uint8(tasks.getTask(id).status), uint8(ITaskRegistry.TaskStatus.Finalized), "settled as committed"
        );
        assertEq(escrow.balanceOf(alice), MAX_PRICE - PAYMENT + DISPUTE_BOND, "the bond back whole");
        assertEq(escrow.balanceOf(miners[2]), _minerShare(2), "no fee to the cheater");
        assertEq(_stake(coordinator), 10 * MIN_VERIFIER_STAKE, "the parties' stake untouched");
        assertEq(_stake(_signer(2)), 5 * MIN_VERIFIER_STAKE);
        assertEq(registry.stakeOf(miners[2]).free, MINER_STAKE, "miner 2 unslashed");
    }

    /// @dev The same without parties: the model's verifiers (sybils of the miners, not parties) are in the pool
    /// when the owner checks and pays, and leave it (`removeModel`, free and instant) before the dispute opens,
    /// joining again afterwards at no cost. Before the fix they took 20% of the owner's bond; now the empty round
    /// ends at once and the bond comes back whole (what is left: the emptied pool judges nothing, documented).
    function test_attack_poolLeftAfterTheOwnerPaid_theOwnerLosesNoBond() public {
        address[] memory sybils = new address[](2);
        for (uint256 i = 0; i < 2; ++i) {
            sybils[i] = makeAddr(string.concat("sybil", vm.toString(i)));
            _registerVerifier(sybils[i], 5 * MIN_VERIFIER_STAKE, _models(OTHER_MODEL));
        }
        vm.roll(block.number + 1);
        assertEq(verifierRegistry.totalWeight(OTHER_MODEL), 10, "what the owner reads when it pays");
        uint256 id = _committedTaskOf(alice, OTHER_MODEL);
        for (uint256 i = 0; i < 2; ++i) {
            vm.prank(sybils[i]);
            verifierRegistry.removeModel(OTHER_MODEL);
        }
        vm.roll(block.number + 1);
        uint256 d = _openDispute(id, 1);
        assertEq(_drawJury(d).length, 0);
        arbitration.resolve(d);
        assertEq(uint8(_statusOf(d)), uint8(IA.DisputeStatus.NoDecision));
        assertEq(
            uint8(tasks.getTask(id).status), uint8(ITaskRegistry.TaskStatus.Finalized), "settled as committed"
        );
        assertEq(escrow.balanceOf(alice), MAX_PRICE - PAYMENT + DISPUTE_BOND);
        assertEq(escrow.balanceOf(miners[2]), _minerShare(2));
        for (uint256 i = 0; i < 2; ++i) {
            vm.prank(sybils[i]);
            verifierRegistry.addModel(OTHER_MODEL);
            assertEq(_stake(sybils[i]), 5 * MIN_VERIFIER_STAKE, "leaving and rejoining cost nothing");
        }
        assertEq(verifierRegistry.totalWeight(OTHER_MODEL), 10);
    }

    // ============================================================ 2. one model's disputes starve another's

    /// @dev Honest H (11 seats) judges MODEL and OTHER_MODEL; a cartel of two one-seat verifiers judges
    /// OTHER_MODEL only. The attacker owns near-free MODEL tasks (1 token each) and disputes them: MODEL's pool is
    /// H plus four one-seat bystanders, so the 5-seat juries land on H until every seat of its stake is locked
    /// (100 tokens per seat for a 5-token bond). Then it disputes a correct line of an honest miner in its
    /// OTHER_MODEL task, hoping H is skipped for want of a free seat (before the fix: the jury was the cartel
    /// alone, it convicted, and the miner's appeal, drawn while H was still locked, came up short). Seats are
    /// drawn by weight whatever is locked: H sits as if the lockers did not exist, the line is acquitted, the
    /// miner keeps its stake and H loses nothing.
    function test_attack_locksFromAnotherModelsDisputesLeaveTheJuryAlone() public {
        address h = makeAddr("honestBoth");
        _registerVerifier(h, 11 * MIN_VERIFIER_STAKE, _two(MODEL, OTHER_MODEL));
        address[] memory cartel = new address[](2);
        for (uint256 i = 0; i < 2; ++i) {
            cartel[i] = makeAddr(string.concat("cartel", vm.toString(i)));
            _registerVerifier(cartel[i], MIN_VERIFIER_STAKE, _models(OTHER_MODEL));
        }
        vm.roll(block.number + 1);
        uint256 idB = _committedTaskOf(cartelOwner, OTHER_MODEL);

        // Lock every seat of H's stake through disputes of the other model.
        uint256 k = 4;
        uint256[] memory lockers = new uint256[](k);
        for (uint256 j = 0; j < k; ++j) {
            lockers[j] = _openDispute(_taskOf(cartelOwner, MODEL, 1e6, 1e6), 0);
            _drawJury(lockers[j]);
        }
        assertGe(_lockedOf(h), _stake(h), "no seat of H's stake is free");

        uint256 d = _openDispute(idB, 1); // a correct line of miner 2
        address[] memory jurors = _drawJury(d);
        assertEq(arbitration.roundOf(d, 0).seatsDrawn, 5, "the jury is seated in full");
        uint256 cartelSeats = _seats(d, 0, cartel[0]) + _seats(d, 0, cartel[1]);
        assertGt(_seats(d, 0, h), cartelSeats, "H sits on it and outvotes the cartel");

        // Round 0 and the lockers at once: H and the bystanders vote the truth everywhere, the cartel at fault.
        _lockersVote(lockers, k, false);
        for (uint256 i = 0; i < jurors.length; ++i) {
            _commitVote(d, jurors[i], jurors[i] == h ? CORRECT : AT_FAULT);
        }
        vm.warp(arbitration.roundOf(d, 0).commitDeadline);
        _lockersVote(lockers, k, true);
        for (uint256 i = 0; i < jurors.length; ++i) {
            _revealVote(d, jurors[i], jurors[i] == h ? CORRECT : AT_FAULT);
        }
        vm.warp(arbitration.roundOf(d, 0).revealDeadline);
        // The owner appeals at once: 11 seats, drawn in full while H is still locked by the lockers.
        _appeal(d, cartelOwner);
        jurors = _drawJury(d);
        assertGt(_lockedOf(h), _stake(h), "H holds more seats than its stake now");
        assertEq(arbitration.roundOf(d, 1).seatsDrawn, 11, "the appeal is seated in full");
        assertGt(_seats(d, 1, h), _seatsOf(d, 1, cartel), "H outvotes the cartel again");
        IA.Vote[] memory votes = new IA.Vote[](jurors.length);
        for (uint256 i = 0; i < jurors.length; ++i) {
            votes[i] = jurors[i] == h ? CORRECT : AT_FAULT;
        }
        _runRoundWith(d, jurors, votes);
        _warpPastAppeal(d);
        arbitration.resolve(d);
        assertEq(uint8(_statusOf(d)), uint8(IA.DisputeStatus.MinersCorrect), "the correct line is acquitted");
        for (uint256 j = 0; j < k; ++j) {
            arbitration.resolve(lockers[j]);
            assertEq(uint8(_statusOf(lockers[j])), uint8(IA.DisputeStatus.MinersCorrect));
        }

        assertEq(_lockedOf(h), 0);
        assertEq(_stake(h), 11 * MIN_VERIFIER_STAKE, "H voted with every outcome: no penalty");
        for (uint256 i = 0; i < 2; ++i) {
            uint256 wrong = _seats(d, 0, cartel[i]) + _seats(d, 1, cartel[i]);
            uint256 lost = Math.min(wrong * MIN_VERIFIER_STAKE * PENALTY_BPS / 10_000, MIN_VERIFIER_STAKE);
            assertEq(_stake(cartel[i]), MIN_VERIFIER_STAKE - lost, "each wrong seat costs the cartel");
            assertEq(_lockedOf(cartel[i]), 0);
        }
        assertEq(
            registry.stakeOf(miners[2]).free + registry.stakeOf(miners[2]).locked,
            MINER_STAKE,
            "the honest miner keeps its whole stake"
        );
    }

    /// @dev Seats `accounts` hold together in round `r` of `disputeId`.
    function _seatsOf(uint256 disputeId, uint8 r, address[] memory accounts)
        internal
        view
        returns (uint256 n)
    {
        for (uint256 i = 0; i < accounts.length; ++i) {
            n += _seats(disputeId, r, accounts[i]);
        }
    }

    /// @dev Every round-0 juror of the first `k` locker disputes commits (or, with `reveal`, reveals) CORRECT.
    function _lockersVote(uint256[] memory lockers, uint256 k, bool reveal) internal {
        for (uint256 j = 0; j < k; ++j) {
            address[] memory jurors = arbitration.jurorsOf(lockers[j], 0);
            for (uint256 i = 0; i < jurors.length; ++i) {
                if (reveal) _revealVote(lockers[j], jurors[i], CORRECT);
                else _commitVote(lockers[j], jurors[i], CORRECT);
            }
        }
    }

    // ========================================================================= 3. audits of a tiny pool

    /// @dev The only verifier of OTHER_MODEL audits a correct line of an honest task. It is cut as the opener, so
    /// the jury is empty. Before the fix that was not "abandoned" (round 0 was drawn): the task was frozen for
    /// three phases and the opener's seat came back whole. Now the empty round ends at once and counts as an
    /// abandoned audit: the opener pays half a seat, as for an audit it left undrawn.
    function test_attack_emptyJuryAuditFreezesTheTaskForFree() public {
        address auditor = makeAddr("loneAuditor");
        _registerVerifier(auditor, MIN_VERIFIER_STAKE, _models(OTHER_MODEL));
        vm.roll(block.number + 1);
        _setAuditRate(10_000);
        uint256 id = _committedTaskOf(alice, OTHER_MODEL);
        _selectedAudit(id);
        uint256 endsBefore = tasks.challengeEndsAt(id);

        uint256 snap = vm.snapshotState();
        uint256 d = _openAudit(id, auditor);
        address[] memory jurors = _drawJury(d);
        assertEq(jurors.length, 0);
        arbitration.resolve(d);
        assertEq(uint8(_statusOf(d)), uint8(IA.DisputeStatus.NoDecision));
        uint256 penalty = MIN_VERIFIER_STAKE * PENALTY_BPS / 10_000;
        assertEq(audits.settleAudit(id), penalty, "the opener pays as for an abandoned audit");
        assertEq(_stake(auditor), MIN_VERIFIER_STAKE - penalty);
        assertEq(_lockedOf(auditor), 0);
        uint256 frozen = block.timestamp - arbitration.getDispute(d).openedAt;
        assertLt(frozen, VOTING_PERIOD, "frozen for less than a phase (the seed's few blocks)");
        assertLe(tasks.challengeEndsAt(id), endsBefore + frozen);
        vm.revertToState(snap);

        // Control: the same audit never drawn costs the opener half a seat.
        d = _openAudit(id, auditor);
        vm.warp(block.timestamp + VOTING_PERIOD);
        arbitration.resolve(d);
        assertEq(audits.settleAudit(id), MIN_VERIFIER_STAKE * PENALTY_BPS / 10_000);
    }

    // ========================================================================== defended attempts

    /// @dev A cartel whale joins the task model's pool one block after the round opened (before its seed exists):
    /// the round reads the pool at its opening, the whale is never drawn.
    function test_defended_joiningAfterTheRoundOpenedIsNeverDrawn() public {
        address whale = makeAddr("whale");
        _registerVerifier(whale, 1000 * MIN_VERIFIER_STAKE, _models(OTHER_MODEL));
        uint256 d = _openDispute(_committedTask(alice), 1); // MODEL
        vm.roll(block.number + 1);
        vm.prank(whale);
        verifierRegistry.addModel(MODEL);
        address[] memory jurors = _drawJury(d);
        assertEq(arbitration.roundOf(d, 0).seatsDrawn, 5, "the four setUp verifiers fill the five seats");
        assertFalse(_in(jurors, whale));
        assertEq(_lockedOf(whale), 0);
        assertEq(arbitration.roundOf(d, 0).weightTotal, 4);
    }

    /// @dev A drawn juror leaves the model's pool and asks to exit, then stays silent: it still holds its seats,
    /// loses exactly the silent seats' penalty, and cannot withdraw while they are locked.
    function test_defended_leavingAfterBeingDrawnDodgesNoPenalty() public {
        address v = makeAddr("leaver");
        _registerVerifier(v, 10 * MIN_VERIFIER_STAKE, _models(MODEL));
        vm.roll(block.number + 1);
        uint256 d = _openDispute(_committedTask(alice), 1);
        address[] memory jurors = _drawJury(d);
        assertTrue(_in(jurors, v));
        uint256 seats = _seats(d, 0, v);
        vm.startPrank(v);
        verifierRegistry.removeModel(MODEL);
        verifierRegistry.requestExit();
        vm.stopPrank();
        IA.Vote[] memory votes = new IA.Vote[](jurors.length);
        for (uint256 i = 0; i < jurors.length; ++i) {
            votes[i] = jurors[i] == v ? IA.Vote.None : AT_FAULT;
        }
        _runRoundWith(d, jurors, votes);
        vm.warp(block.timestamp + VERIFIER_UNBONDING);
        vm.prank(v);
        vm.expectRevert(
            abi.encodeWithSelector(IV.VerifierStakeLocked.selector, v, seats * MIN_VERIFIER_STAKE)
        );
        verifierRegistry.withdraw();
        _warpPastAppeal(d);
        arbitration.resolve(d);
        uint256 penalty = seats * MIN_VERIFIER_STAKE * PENALTY_BPS / 10_000;
        assertEq(_stake(v), 10 * MIN_VERIFIER_STAKE - penalty, "penalized as any silent seat");
        vm.warp(verifierRegistry.verifierOf(v).releaseAt);
        vm.prank(v);
        assertEq(verifierRegistry.withdraw(), 10 * MIN_VERIFIER_STAKE - penalty);
    }

    /// @dev A verifier penalized in one model's dispute keeps its old (stale) weight in its other pools, where a
    /// landing on it counts in proportion to the stake it has left; leaving and re-adding a model takes its stake
    /// now, never the old weight. One penalized down to nothing is seated no more, and cannot re-add a model.
    function test_defended_reAddingAModelTakesTheStakeNowNotTheOldWeight() public {
        address v = makeAddr("twoModels");
        _registerVerifier(v, 10 * MIN_VERIFIER_STAKE, _two(MODEL, OTHER_MODEL));
        vm.roll(block.number + 1);
        // v alone in OTHER_MODEL's pool: it takes all five seats and stays silent.
        uint256 d = _openDispute(_committedTaskOf(alice, OTHER_MODEL), 1);
        assertEq(_drawJury(d).length, 1);
        assertEq(_seats(d, 0, v), 5);
        vm.warp(arbitration.roundOf(d, 0).appealDeadline);
        arbitration.resolve(d);
        assertEq(
            _stake(v), 10 * MIN_VERIFIER_STAKE - 5 * MIN_VERIFIER_STAKE / 2, "five silent seats: 5 * 50 lost"
        );
        assertEq(verifierRegistry.totalWeight(OTHER_MODEL), 10, "stale weight stays until it moves");
        vm.startPrank(v);
        verifierRegistry.removeModel(OTHER_MODEL);
        verifierRegistry.addModel(OTHER_MODEL);
        vm.stopPrank();
        assertEq(verifierRegistry.totalWeight(OTHER_MODEL), 7, "re-added at its stake now (750 tokens)");
    }

    /// @dev See above: a verifier with no stake left keeps its stale weight in the pool it did not leave, but
    /// every landing on it is lost, so the other verifiers fill the jury; it cannot join a pool again.
    function test_defended_aVerifierPenalizedToNothingIsSeatedNoMore() public {
        address v = makeAddr("twoModels");
        _registerVerifier(v, 2 * MIN_VERIFIER_STAKE, _two(MODEL, OTHER_MODEL));
        vm.roll(block.number + 1);
        uint256 d = _openDispute(_committedTaskOf(alice, OTHER_MODEL), 1);
        _drawJury(d);
        assertEq(_seats(d, 0, v), 5, "alone in the pool: all five seats on a stake of two");
        vm.warp(arbitration.roundOf(d, 0).appealDeadline);
        arbitration.resolve(d);
        assertEq(_stake(v), 0, "five silent seats cost 250, capped at its 200");
        assertEq(verifierRegistry.totalWeight(MODEL), 4 + 2, "its stale weight in MODEL's pool");
        vm.prank(v);
        verifierRegistry.removeModel(OTHER_MODEL);
        vm.prank(v);
        vm.expectRevert(abi.encodeWithSelector(IV.NotVerifier.selector, v));
        verifierRegistry.addModel(OTHER_MODEL);
        uint256 d2 = _openDispute(_committedTask(bob), 1);
        _drawJury(d2);
        assertEq(_seats(d2, 0, v), 0, "never seated on no stake");
        assertEq(arbitration.roundOf(d2, 0).seatsDrawn, 5, "the four others fill the jury");
        _assertEscrowSolvent();
    }

    /// @dev Model list games: zero model, a duplicate, a fifth model, removing one not judged, and churning
    /// remove/add many times in one block: the pool's weight never counts the verifier twice.
    function test_defended_modelListManipulation() public {
        address v = makeAddr("listGamer");
        bytes32[] memory four = new bytes32[](4);
        for (uint256 i = 0; i < 4; ++i) {
            four[i] = bytes32(i + 1);
        }
        _registerVerifier(v, 3 * MIN_VERIFIER_STAKE, four);
        vm.startPrank(v);
        vm.expectRevert(IV.ZeroModel.selector);
        verifierRegistry.addModel(bytes32(0));
        vm.expectRevert(abi.encodeWithSelector(IV.TooManyModels.selector, 5, 4));
        verifierRegistry.addModel(MODEL);
        vm.expectRevert(abi.encodeWithSelector(IV.NotJudgingModel.selector, v, MODEL));
        verifierRegistry.removeModel(MODEL);
        verifierRegistry.removeModel(bytes32(uint256(1)));
        vm.expectRevert(abi.encodeWithSelector(IV.AlreadyJudgingModel.selector, v, bytes32(uint256(2))));
        verifierRegistry.addModel(bytes32(uint256(2)));
        for (uint256 i = 0; i < 10; ++i) {
            verifierRegistry.addModel(MODEL);
            verifierRegistry.removeModel(MODEL);
            verifierRegistry.addModel(MODEL);
            verifierRegistry.removeModel(bytes32(uint256(4)));
            verifierRegistry.addModel(bytes32(uint256(4)));
            verifierRegistry.removeModel(MODEL);
        }
        verifierRegistry.addModel(MODEL);
        vm.stopPrank();
        assertEq(verifierRegistry.totalWeight(MODEL), 4 + 3, "counted once");
        assertEq(verifierRegistry.totalWeight(bytes32(uint256(4))), 3);
        assertEq(verifierRegistry.totalWeight(bytes32(uint256(1))), 0);
        assertEq(verifierRegistry.modelsOf(v).length, 4);
    }

    /// @dev An honest verifier that stops judging OTHER_MODEL in the same block a dispute of it opens (after the
    /// opening) is out of that round: it is never drawn there and loses nothing on a model it left.
    function test_defended_leavingInTheOpeningBlockIsOutOfTheRound() public {
        address v = makeAddr("leaver");
        _registerVerifier(v, 5 * MIN_VERIFIER_STAKE, _two(MODEL, OTHER_MODEL));
        vm.roll(block.number + 1);
        uint256 id = _committedTaskOf(alice, OTHER_MODEL);
        uint256 d = _openDispute(id, 1);
        vm.prank(v);
        verifierRegistry.removeModel(OTHER_MODEL);
        assertEq(_drawJury(d).length, 0);
        vm.warp(arbitration.roundOf(d, 0).appealDeadline);
        arbitration.resolve(d);
        assertEq(_stake(v), 5 * MIN_VERIFIER_STAKE);
        assertEq(_lockedOf(v), 0);
    }

    /// @dev Gas: pool churn (remove/add every block) grows each Fenwick node's checkpoint history; a draw reads
    /// the recent tail only, so the draw's gas grows slowly. Logs the numbers.
    function test_defended_churnBarelyMovesTheDrawsGas() public {
        _newVerifiers("many", 40, 1);
        address churner = makeAddr("churner");
        _registerVerifier(churner, MIN_VERIFIER_STAKE);
        vm.roll(block.number + 1);

        uint256 snap = vm.snapshotState();
        uint256 d0 = _openDispute(_committedTask(alice), 1);
        (, IA.Round memory r0) = _round(d0);
        vm.roll(r0.seedBlock + 1);
        _setSeed(r0.seedBlock, keccak256("gas seed"));
        uint256 g = gasleft();
        arbitration.drawJury(d0);
        uint256 baseline = g - gasleft();
        vm.revertToState(snap);

        for (uint256 i = 0; i < 1000; ++i) {
            vm.prank(churner);
            if (i % 2 == 0) verifierRegistry.removeModel(MODEL);
            else verifierRegistry.addModel(MODEL);
            vm.roll(block.number + 1);
        }
        uint256 d1 = _openDispute(_committedTask(alice), 1);
        (, IA.Round memory r1) = _round(d1);
        vm.roll(r1.seedBlock + 1);
        _setSeed(r1.seedBlock, keccak256("gas seed"));
        g = gasleft();
        arbitration.drawJury(d1);
        uint256 churned = g - gasleft();
        emit log_named_uint("draw gas, fresh pool", baseline);
        emit log_named_uint("draw gas, after 1000 blocks of churn", churned);
        assertLt(churned, baseline * 3 / 2, "a third more after 1,000 blocks of churn (519,476 -> 680,557)");
    }
}
