// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {BaseTest} from "./BaseTest.sol";
import {IArbitration as IA} from "../src/interfaces/IArbitration.sol";

/// @notice The second review's classes 4 (concentrated stake beats the odds) and 3 (juries emptied: an appeal
/// drawn short), as the attacker's attempts.
contract JurySharesTest is BaseTest {
    IA.Vote internal constant AT_FAULT = IA.Vote.MinersAtFault;
    IA.Vote internal constant CORRECT = IA.Vote.MinersCorrect;

    /// @dev Juries drawn, each from its own seed, in the statistical test.
    uint256 internal constant JURIES = 800;
    /// @dev Stated tolerance on the whale's mean seat share: about three standard errors of 800 juries of 15
    /// seats (0.12 / sqrt(800) = 0.0043). The draw the review attacked (this contract with the thinning taken
    /// out) gives the whale 0.466 here against a weight share of 0.449: outside it.
    uint256 internal constant TOLERANCE_PPM = 12_000;

    function setUp() public override {
        super.setUp();
        _registerAll();
    }

    /// @dev Class 4: a whale holding 44 seats of weight against fifty-four one-seat verifiers (50 here, 4 from
    /// BaseTest: 44 / 98 of the weight) is never skipped, while a one-seat verifier drawn once is: in the draw
    /// the review attacked, the whale's share of a jury exceeded its share of the weight. Every seat now lands by
    /// weight, whatever is locked (a verifier drawn once may be drawn again): over 800 juries of 15 seats, the
    /// whale's mean share is its weight share within the stated tolerance.
    function test_attack_aWhaleGetsNoMoreThanItsWeightShare() public {
        address whale = makeAddr("whale");
        _registerVerifier(whale, 44 * MIN_VERIFIER_STAKE);
        _newVerifiers("one-seat", 50, 1);
        IA.Config memory c = arbitration.config();
        c.baseJury = 15;
        vm.prank(governor);
        arbitration.setConfig(c);
        vm.warp(block.timestamp + 1);
        uint256 d = _openDispute(_committedTask(alice), 0);
        (, IA.Round memory round) = _round(d);
        assertEq(round.seats, 15);
        vm.roll(round.seedBlock + 1);

        uint256 whaleSeats;
        uint256 seats;
        for (uint256 i = 0; i < JURIES; ++i) {
            uint256 snapshot = vm.snapshotState();
            _setSeed(round.seedBlock, keccak256(abi.encode("jury", i)));
            arbitration.drawJury(d);
            whaleSeats += _seats(d, 0, whale);
            seats += arbitration.roundOf(d, 0).seatsDrawn;
            vm.revertToState(snapshot);
        }
        assertEq(seats, 15 * JURIES, "every seat filled");
        uint256 sharePpm = whaleSeats * 1e6 / seats;
        uint256 weightPpm = uint256(44) * 1e6 / 98;
        assertApproxEqAbs(sharePpm, weightPpm, TOLERANCE_PPM, "the whale's seat share is its weight share");
    }

    /// @dev Class 3: a convicted miner appeals to a jury that cannot be filled (every verifier of the model asked
    /// to exit after round 0 was drawn: they still serve round 0, and the appeal's pool is empty). The appeal
    /// round drawn short ends at once as undrawn: its seats go back, the conviction stands, and the miner's appeal
    /// bond is forfeited (the jurors' reward to round 0's coherent jurors, the rest to the owner). Before, a short
    /// round decided with the few seats it had.
    function test_attack_anAppealDrawnShortLeavesTheConvictionStanding() public {
        uint256 id = _committedTask(alice);
        uint256 d = _openDispute(id, 1); // [m2], a wrong line
        address[] memory jurors = _drawJury(d);
        assertEq(arbitration.roundOf(d, 0).seatsDrawn, 5, "BaseTest's four one-seat verifiers fill it");
        for (uint256 i = 0; i < verifiers.length; ++i) {
            vm.prank(verifiers[i]);
            verifierRegistry.requestExit();
        }
        IA.Vote[] memory votes = new IA.Vote[](jurors.length);
        for (uint256 i = 0; i < jurors.length; ++i) {
            votes[i] = AT_FAULT;
        }
        _runRoundWith(d, jurors, votes);
        _warpPastReveal(d);
        uint256 bond = 2 * DISPUTE_BOND;
        _fund(miners[2], address(escrow), bond);
        vm.prank(miners[2]);
        arbitration.appeal(d);
        (, IA.Round memory round) = _round(d);
        vm.roll(round.seedBlock + 1);
        _setSeed(round.seedBlock, keccak256("appeal seed"));
        vm.expectEmit(address(arbitration));
        emit IA.AppealJuryShort(d, 1, 0, 11);
        arbitration.drawJury(d);
        round = arbitration.roundOf(d, 1);
        assertEq(round.commitDeadline, 0, "no jury sits");
        assertEq(arbitration.jurorsOf(d, 1).length, 0);
        assertEq(arbitration.resolve(d) == IA.DisputeStatus.MinersAtFault, true, "the conviction stands");

        uint256 reward = STAKE_LOCK / 10 + bond / 10;
        uint256 perSeat = reward / 5;
        for (uint256 i = 0; i < jurors.length; ++i) {
            assertEq(
                escrow.balanceOf(jurors[i]),
                perSeat * _seats(d, 0, jurors[i]),
                "round 0's seats share both rewards"
            );
            assertEq(verifierRegistry.verifierOf(jurors[i]).locked, 0);
        }
        assertEq(
            escrow.balanceOf(alice),
            MAX_PRICE + DISPUTE_BOND + bond - bond / 10,
            "refund, bond and the forfeited appeal bond less the reward (a slash is no party's)"
        );
        assertEq(escrow.balanceOf(miners[2]), 0, "the appellant's bond is gone");
        _assertEscrowSolvent();
    }

    /// @dev Seats are drawn whatever is locked, so a one-seat verifier can hold more seats at once than its stake
    /// covers: here each of BaseTest's four verifiers (one seat of stake each) sits on two 5-seat juries at once
    /// and stays silent on both. Its penalties stop at its stake (never more than it has), the escrow receives
    /// exactly what was taken and stays solvent, and a verifier left with no stake is seated no more.
    function test_aVerifierHoldingMoreSeatsThanItsStakeLosesAtMostItsStake() public {
        uint256 d1 = _openDispute(_committedTask(alice), 1);
        uint256 d2 = _openDispute(_committedTask(alice), 1);
        _drawJury(d1);
        _drawJury(d2);
        address[4] memory four = [verifiers[0], verifiers[1], verifiers[2], verifiers[3]];
        uint256 seats;
        for (uint256 i = 0; i < 4; ++i) {
            seats += _seats(d1, 0, four[i]) + _seats(d2, 0, four[i]);
        }
        assertEq(seats, 10, "both juries seated in full by four one-seat verifiers");
        uint256 poolBefore = escrow.auditPool();
        _warpPastAppeal(d2);
        arbitration.resolve(d1);
        arbitration.resolve(d2);
        uint256 taken;
        for (uint256 i = 0; i < 4; ++i) {
            uint256 held = _seats(d1, 0, four[i]) + _seats(d2, 0, four[i]);
            uint256 due = held * MIN_VERIFIER_STAKE * PENALTY_BPS / 10_000;
            uint256 lost = due < MIN_VERIFIER_STAKE ? due : MIN_VERIFIER_STAKE;
            assertEq(_stake(four[i]), MIN_VERIFIER_STAKE - lost, "at most the stake");
            assertEq(_lockedOf(four[i]), 0);
            taken += lost;
        }
        assertEq(
            escrow.auditPool(), poolBefore + taken, "no coherent seat: every penalty taken goes to the pool"
        );
        _assertEscrowSolvent();
    }

    function _warpPastReveal(uint256 d) internal {
        (, IA.Round memory round) = _round(d);
        vm.warp(round.revealDeadline);
    }
}
