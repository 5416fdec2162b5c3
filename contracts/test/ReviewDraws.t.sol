// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {BaseTest} from "./BaseTest.sol";
import {Headers} from "./utils/Headers.sol";
import {IArbitration as IA} from "../src/interfaces/IArbitration.sol";
import {BlockRandomness} from "../src/BlockRandomness.sol";
import {BlockHeader} from "../src/libraries/BlockHeader.sol";

/// @notice A cold review's attempts on the jury draw and its seeds, by a reviewer that did not write them, kept as
/// tests. `test_attack_*`: attacks that worked until the fix they led to (dead weight left by exits: the
/// sortition now removes an exit's weight and each round reads it as it stood when the round opened; the order
/// of draws: seats are drawn by weight whatever other rounds locked); `test_defended_*`: ideas the code already
/// defended.
contract ReviewDrawsTest is BaseTest {
    IA.Vote internal constant AT_FAULT = IA.Vote.MinersAtFault;
    IA.Vote internal constant CORRECT = IA.Vote.MinersCorrect;

    uint256 internal constant WHALE_SEATS = 1000;

    address internal whale = makeAddr("deadWeightWhale");

    function setUp() public override {
        super.setUp();
        _registerAll();
        _newVerifiers("honest", 30, 1); // 34 live one-seat verifiers in all
    }

    // =============================================================================================== PoCs

    /// @dev Dead weight (class 3): a whale registers 1000 seats, asks to exit in the same block and withdraws
    /// every token after the unbonding. With an append-only sortition list its range stayed in every later round
    /// and lost every draw that landed on it: 105 of 200 round-0 juries came out empty (NoDecision: the cheater
    /// unpunished). An exit now takes the weight out of the sortition from its block on: every one of 200 juries
    /// is seated in full from the 34 live verifiers, and a wrong line is convicted.
    function test_attack_deadWeightFromAnExitedWhaleEmptiesNoJury() public {
        uint256 stake = WHALE_SEATS * MIN_VERIFIER_STAKE;
        _registerVerifier(whale, stake);
        vm.prank(whale);
        verifierRegistry.requestExit();
        vm.roll(block.number + 1);
        vm.warp(block.timestamp + VERIFIER_UNBONDING);
        vm.prank(whale);
        verifierRegistry.withdraw();
        assertEq(token.balanceOf(whale), stake, "the whale got every token back");

        uint256 id = _committedTask(alice);
        uint256 d = _openDispute(id, 1); // a wrong line by miners[2]
        (, IA.Round memory round) = _round(d);
        assertEq(round.weightTotal, 34, "the exited whale's weight is gone");
        vm.roll(round.seedBlock + 1);
        uint256 seats;
        for (uint256 i = 0; i < 200; ++i) {
            uint256 snap = vm.snapshotState();
            _setSeed(round.seedBlock, keccak256(abi.encode("any seed", i)));
            arbitration.drawJury(d);
            seats += arbitration.roundOf(d, 0).seatsDrawn;
            vm.revertToState(snap);
        }
        assertEq(seats, 1000, "every seat of every jury filled");
        _setSeed(round.seedBlock, keccak256(abi.encode("any seed", uint256(9))));
        _decide(d, AT_FAULT);
        assertEq(
            uint8(arbitration.getDispute(d).status),
            uint8(IA.DisputeStatus.MinersAtFault),
            "the wrong line is convicted"
        );
    }

    /// @dev A verifier that asks to exit after a round opened still serves it (its weight was in the round, and its
    /// stake cannot leave while a seat holds it): a whale that exits the block after an appeal opens cannot leave
    /// the appeal short.
    function test_attack_exitAfterARoundOpenedStillServesIt() public {
        _registerVerifier(whale, WHALE_SEATS * MIN_VERIFIER_STAKE);
        vm.roll(block.number + 1);
        uint256 d = _openDispute(_committedTask(alice), 1);
        vm.roll(block.number + 1);
        vm.prank(whale);
        verifierRegistry.requestExit();
        address[] memory jurors = _drawJury(d);
        assertEq(arbitration.roundOf(d, 0).seatsDrawn, 5, "seated in full");
        assertTrue(_in(jurors, whale), "the whale holds nearly all the weight of this round: it sits");
        vm.warp(block.timestamp + VERIFIER_UNBONDING);
        vm.prank(whale);
        vm.expectRevert();
        verifierRegistry.withdraw(); // its seats hold its stake until the dispute ends
    }

    /// @dev The owner appeals a wrong round-0 verdict (MinersCorrect on a wrong line). The cheating miner
    /// front-runs the appeal with register(1000 seats) + requestExit from a fresh address, in the same block. With
    /// the append-only list the appeal round took in the exiting range, was drawn short and ended undrawn: the
    /// wrong verdict stood and the owner's bonds went to the cheater. Now the whale's weight is out of the
    /// sortition by the end of that block: the appeal is seated in full, as without the whale.
    function test_attack_frontRunAppealWithExitingWhaleCannotForceItShort() public {
        uint256 id = _committedTask(alice);
        uint256 d = _openDispute(id, 1); // [m2], a wrong line
        _runRound(d, CORRECT); // a bribed / mistaken round 0
        assertEq(arbitration.roundOf(d, 0).seatsDrawn, 5);
        (, IA.Round memory r0) = _round(d);
        vm.warp(r0.revealDeadline);
        uint256 bond = 2 * DISPUTE_BOND;
        _fund(alice, address(escrow), bond);

        // Control: the appeal without the whale.
        uint256 snap = vm.snapshotState();
        vm.prank(alice);
        arbitration.appeal(d);
        (, IA.Round memory r1) = _round(d);
        vm.roll(r1.seedBlock + 1);
        _setSeed(r1.seedBlock, keccak256("appeal seed"));
        arbitration.drawJury(d);
        assertEq(arbitration.roundOf(d, 1).seatsDrawn, 11, "control: the appeal is seated in full");
        vm.revertToState(snap);

        // Attack: same block, the whale's registration and exit land before the appeal.
        uint256 stake = WHALE_SEATS * MIN_VERIFIER_STAKE;
        _registerVerifier(whale, stake);
        vm.prank(whale);
        verifierRegistry.requestExit();
        vm.prank(alice);
        arbitration.appeal(d);
        (, r1) = _round(d);
        vm.roll(r1.seedBlock + 1);
        _setSeed(r1.seedBlock, keccak256("appeal seed"));
        arbitration.drawJury(d);
        assertEq(arbitration.roundOf(d, 1).seatsDrawn, 11, "the appeal is seated in full all the same");
        assertGt(arbitration.roundOf(d, 1).commitDeadline, 0);
        assertEq(verifierRegistry.verifierOf(whale).locked, 0, "the whale sits on nothing");
    }

    /// @dev Draw order steered juries: a round was drawn against the registry's free seats at the time of the
    /// call, and anyone calls drawJury whenever they like once the seed is known (it is public from seedBlock +
    /// 1), so with two disputes pending whoever drew chose the order and so which of two known juries sat on each
    /// (8 live seats, two 5-seat juries: drawn second, one came up short). Seats are drawn by weight whatever is
    /// locked: each jury is the same whichever is drawn first, and both are seated in full.
    function test_attack_drawOrderAcrossDisputesChoosesNoJury() public {
        // Only 8 live seats: two 5-seat juries would compete for them.
        for (uint256 i = 0; i < 26; ++i) {
            address v = makeAddr(string.concat("honest", vm.toString(i)));
            vm.prank(v);
            verifierRegistry.requestExit();
        }
        vm.roll(block.number + 1);
        uint256 d1 = _openDispute(_committedTask(alice), 1);
        uint256 d2 = _openDispute(_committedTask(alice), 1);
        (, IA.Round memory r) = _round(d2);
        vm.roll(r.seedBlock + 1);
        _setSeed(r.seedBlock, keccak256("public seed"));

        uint256 snap = vm.snapshotState();
        arbitration.drawJury(d1);
        arbitration.drawJury(d2);
        bytes memory d1First = _jury(d1);
        bytes memory d2Second = _jury(d2);
        vm.revertToState(snap);
        arbitration.drawJury(d2);
        arbitration.drawJury(d1);
        assertEq(_jury(d2), d2Second, "d2's jury does not depend on the order");
        assertEq(_jury(d1), d1First, "nor d1's");
        assertEq(arbitration.roundOf(d1, 0).seatsDrawn, 5, "both seated in full");
        assertEq(arbitration.roundOf(d2, 0).seatsDrawn, 5);
    }

    /// @dev Round 0's jurors of `disputeId` in the order drawn, each with its seats, encoded for comparison.
    function _jury(uint256 disputeId) internal view returns (bytes memory jury) {
        address[] memory jurors = arbitration.jurorsOf(disputeId, 0);
        for (uint256 i = 0; i < jurors.length; ++i) {
            jury = bytes.concat(jury, abi.encode(jurors[i], _seats(disputeId, 0, jurors[i])));
        }
    }

    function _paymentOf(uint256 id, address miner) internal view returns (uint256) {
        address[] memory list = tasks.minersOf(id);
        uint256[] memory amounts = tasks.minerAmountsOf(id);
        for (uint256 i = 0; i < list.length; ++i) {
            if (list[i] == miner) return amounts[i];
        }
        return 0;
    }

    // ========================================================================================== defended

    /// @dev A value cannot be proven for the current or a future block, nor for one older than 256 blocks, nor
    /// from a header that is not the block's.
    function test_defended_noValueForCurrentFutureOrForgedBlock() public {
        bytes memory header = Headers.withMixHash(keccak256("x"));
        vm.expectRevert(abi.encodeWithSelector(BlockRandomness.HeaderUnavailable.selector, block.number));
        randomness.prove(block.number, header);
        vm.expectRevert(abi.encodeWithSelector(BlockRandomness.HeaderUnavailable.selector, block.number + 1));
        randomness.prove(block.number + 1, header);
        vm.setBlockhash(block.number - 1, keccak256("other"));
        vm.expectRevert();
        randomness.prove(block.number - 1, header);
        vm.roll(block.number + 300);
        vm.expectRevert(
            abi.encodeWithSelector(BlockRandomness.HeaderUnavailable.selector, block.number - 300)
        );
        randomness.prove(block.number - 300, header);
        assertTrue(randomness.isExpired(block.number - 300));
    }

    /// @dev A genuine-hash header whose 14th field is not 32 bytes (or a nested list) is refused, never misread.
    function test_defended_oddEncodingsRefused() public {
        // 13 empty strings then a 31-byte string.
        bytes memory payload;
        for (uint256 i = 0; i < 13; ++i) {
            payload = bytes.concat(payload, bytes1(0x80));
        }
        payload = bytes.concat(payload, bytes1(0x9f), new bytes(31));
        bytes memory header = bytes.concat(bytes1(uint8(0xc0 + payload.length)), payload);
        vm.setBlockhash(block.number - 1, keccak256(header));
        vm.expectRevert(BlockHeader.MalformedHeader.selector);
        randomness.prove(block.number - 1, header);
        // A nested list before the mix hash.
        bytes memory nested = bytes.concat(bytes1(0xc0));
        for (uint256 i = 0; i < 12; ++i) {
            nested = bytes.concat(nested, bytes1(0x80));
        }
        nested = bytes.concat(nested, bytes1(0xa0), keccak256("m"));
        header = bytes.concat(bytes1(uint8(0xc0 + nested.length)), nested);
        vm.setBlockhash(block.number - 2, keccak256(header));
        vm.expectRevert(BlockHeader.MalformedHeader.selector);
        randomness.prove(block.number - 2, header);
    }

    /// @dev The parties' registrations (the owner and a miner, each 200 seats, the owner named twice as owner and
    /// opener) are cut out of the number line: they are never drawn and take no draws, so the jury fills.
    function test_defended_partiesCutOutEvenAsWhales() public {
        _registerVerifier(alice, 200 * MIN_VERIFIER_STAKE);
        _registerVerifier(miners[2], 200 * MIN_VERIFIER_STAKE);
        vm.roll(block.number + 1);
        uint256 d = _openDispute(_committedTask(alice), 1);
        address[] memory jurors = _drawJury(d);
        assertEq(arbitration.roundOf(d, 0).seatsDrawn, 5, "full jury");
        for (uint256 i = 0; i < jurors.length; ++i) {
            assertTrue(jurors[i] != alice && jurors[i] != miners[2]);
        }
    }

    /// @dev A 500-seat verifier registered in a block after the round opened is never drawn.
    function test_defended_lateRegistrationNeverDrawnAndShortSeatsReleased() public {
        uint256 d = _openDispute(_committedTask(alice), 1);
        vm.roll(block.number + 1);
        address late = makeAddr("late");
        _registerVerifier(late, 500 * MIN_VERIFIER_STAKE);
        address[] memory jurors = _drawJury(d);
        for (uint256 i = 0; i < jurors.length; ++i) {
            assertTrue(jurors[i] != late);
        }
        assertEq(verifierRegistry.verifierOf(late).locked, 0);
    }
}
