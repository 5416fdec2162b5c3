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
    /// the review attacked, the whale's share of a jury exceeded its share of the weight. A landing now counts
    /// with probability (free seats / weight), so every free seat is equally likely whoever holds it: over 800
    /// juries of 15 seats, the whale's mean share is its weight share within the stated tolerance.
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

    /// @dev Class 3: a convicted miner appeals to a jury that cannot be filled (the market's verifiers already
    /// sit on round 0, or too few exist). The appeal round drawn short ends at once as undrawn: its seats go back,
    /// the conviction stands, and the miner's appeal bond is forfeited (the jurors' reward to round 0's coherent
    /// jurors, the rest to the owner). Before, a short round decided with the few seats it had.
    function test_attack_anAppealDrawnShortLeavesTheConvictionStanding() public {
        uint256 id = _committedTask(alice);
        uint256 d = _openDispute(id, 1); // [m2], a wrong line
        address[] memory jurors = _runRound(d, AT_FAULT);
        assertEq(jurors.length, 4, "BaseTest's four one-seat verifiers");
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
        uint256 perSeat = reward / 4;
        for (uint256 i = 0; i < 4; ++i) {
            assertEq(escrow.balanceOf(jurors[i]), perSeat, "round 0's jurors share both rewards");
            assertEq(verifierRegistry.verifierOf(jurors[i]).locked, 0);
        }
        assertEq(
            escrow.balanceOf(alice),
            MAX_PRICE + DISPUTE_BOND + STAKE_LOCK - STAKE_LOCK / 10 + bond - bond / 10
        );
        assertEq(escrow.balanceOf(miners[2]), 0, "the appellant's bond is gone");
        _assertEscrowSolvent();
    }

    function _warpPastReveal(uint256 d) internal {
        (, IA.Round memory round) = _round(d);
        vm.warp(round.revealDeadline);
    }
}
