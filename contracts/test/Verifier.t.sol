// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {IERC20Errors} from "@openzeppelin/contracts/interfaces/draft-IERC6093.sol";
import {BaseTest} from "./BaseTest.sol";
import {IArbitration as IA} from "../src/interfaces/IArbitration.sol";

/// @notice Staked verifiers: registration, exit, withdrawal, and which disputes a verifier may vote on.
contract VerifierTest is BaseTest {
    address internal carol = makeAddr("carol");

    function setUp() public override {
        super.setUp();
        _registerAll();
    }

    function _register(address v, uint256 stake) internal {
        _fund(v, address(arbitration), stake);
        vm.prank(v);
        arbitration.registerVerifier(stake);
    }

    function _exit(address v) internal {
        vm.prank(v);
        arbitration.requestVerifierExit();
    }

    function _assertVerifier(address v, uint256 stake, uint256 registered, uint256 exitAt, uint256 releaseAt)
        internal
        view
    {
        IA.Verifier memory r = arbitration.verifierOf(v);
        assertEq(r.stake, stake, "stake");
        assertEq(r.registeredAtBlock, registered, "registered");
        assertEq(r.exitAtBlock, exitAt, "exit");
        assertEq(r.releaseAt, releaseAt, "release");
    }

    /// @dev `v` votes on `disputeId`, or is refused as not eligible.
    function _votes(address v, uint256 disputeId) internal returns (bool) {
        vm.prank(v);
        try arbitration.vote(disputeId, IA.Vote.MinersCorrect) {
            return true;
        } catch (bytes memory err) {
            assertEq(err, abi.encodeWithSelector(IA.VerifierNotEligible.selector, disputeId, v));
            return false;
        }
    }

    // ---- register

    function test_registerVerifier_pullsStakeAndRecords() public {
        _fund(carol, address(arbitration), 150e6);
        uint256 held = token.balanceOf(address(arbitration));
        vm.expectEmit(address(arbitration));
        emit IA.VerifierRegistered(carol, 150e6);
        vm.prank(carol);
        arbitration.registerVerifier(150e6);
        _assertVerifier(carol, 150e6, block.number, 0, 0);
        assertTrue(arbitration.isVerifier(carol));
        assertEq(token.balanceOf(carol), 0);
        assertEq(token.balanceOf(address(arbitration)), held + 150e6);
        assertEq(escrow.totalLiabilities(), 0, "verifier stake is not escrow money");
    }

    function test_registerVerifier_reverts() public {
        _fund(carol, address(arbitration), MIN_VERIFIER_STAKE);
        vm.startPrank(carol);
        vm.expectRevert(
            abi.encodeWithSelector(
                IA.VerifierStakeTooLow.selector, MIN_VERIFIER_STAKE - 1, MIN_VERIFIER_STAKE
            )
        );
        arbitration.registerVerifier(MIN_VERIFIER_STAKE - 1);
        vm.expectRevert(
            abi.encodeWithSelector(
                IERC20Errors.ERC20InsufficientAllowance.selector,
                address(arbitration),
                MIN_VERIFIER_STAKE,
                MIN_VERIFIER_STAKE + 1
            )
        );
        arbitration.registerVerifier(MIN_VERIFIER_STAKE + 1);
        arbitration.registerVerifier(MIN_VERIFIER_STAKE);
        vm.expectRevert(abi.encodeWithSelector(IA.VerifierAlreadyRegistered.selector, carol));
        arbitration.registerVerifier(MIN_VERIFIER_STAKE);
        // Exiting is still registered until the stake is withdrawn.
        arbitration.requestVerifierExit();
        vm.expectRevert(abi.encodeWithSelector(IA.VerifierAlreadyRegistered.selector, carol));
        arbitration.registerVerifier(MIN_VERIFIER_STAKE);
        vm.stopPrank();
    }

    // ---- exit and withdraw

    function test_requestVerifierExit() public {
        address v = verifiers[0];
        uint256 registered = arbitration.verifierOf(v).registeredAtBlock;
        vm.roll(block.number + 10);
        uint256 releaseAt = block.timestamp + VERIFIER_UNBONDING;
        vm.expectEmit(address(arbitration));
        emit IA.VerifierExitRequested(v, releaseAt);
        _exit(v);
        _assertVerifier(v, MIN_VERIFIER_STAKE, registered, block.number, releaseAt);
        assertFalse(arbitration.isVerifier(v));

        vm.prank(v);
        vm.expectRevert(abi.encodeWithSelector(IA.VerifierExitAlreadyRequested.selector, v, releaseAt));
        arbitration.requestVerifierExit();
        vm.prank(carol);
        vm.expectRevert(abi.encodeWithSelector(IA.NotVerifier.selector, carol));
        arbitration.requestVerifierExit();
    }

    function test_withdrawVerifierStake() public {
        address v = verifiers[1];
        vm.prank(v);
        vm.expectRevert(abi.encodeWithSelector(IA.VerifierExitNotRequested.selector, v));
        arbitration.withdrawVerifierStake();
        vm.prank(carol);
        vm.expectRevert(abi.encodeWithSelector(IA.NotVerifier.selector, carol));
        arbitration.withdrawVerifierStake();

        _exit(v);
        uint256 releaseAt = block.timestamp + VERIFIER_UNBONDING;
        vm.warp(releaseAt - 1);
        vm.prank(v);
        vm.expectRevert(
            abi.encodeWithSelector(IA.VerifierUnbondingNotFinished.selector, releaseAt, releaseAt - 1)
        );
        arbitration.withdrawVerifierStake();

        vm.warp(releaseAt);
        uint256 held = token.balanceOf(address(arbitration));
        vm.expectEmit(address(arbitration));
        emit IA.VerifierStakeWithdrawn(v, MIN_VERIFIER_STAKE);
        vm.prank(v);
        assertEq(arbitration.withdrawVerifierStake(), MIN_VERIFIER_STAKE);
        assertEq(token.balanceOf(v), MIN_VERIFIER_STAKE, "the whole stake: never slashed");
        assertEq(token.balanceOf(address(arbitration)), held - MIN_VERIFIER_STAKE);
        _assertVerifier(v, 0, 0, 0, 0);
        assertFalse(arbitration.isVerifier(v));
        vm.prank(v);
        vm.expectRevert(abi.encodeWithSelector(IA.NotVerifier.selector, v));
        arbitration.withdrawVerifierStake();

        // A withdrawn verifier may come back, as a new registration.
        vm.roll(block.number + 3);
        vm.prank(v);
        token.approve(address(arbitration), MIN_VERIFIER_STAKE);
        vm.prank(v);
        arbitration.registerVerifier(MIN_VERIFIER_STAKE);
        _assertVerifier(v, MIN_VERIFIER_STAKE, block.number, 0, 0);
    }

    /// @dev The unbonding period of an exit is fixed when it is requested.
    function test_exit_keepsItsUnbondingPeriod() public {
        _exit(verifiers[0]);
        vm.prank(admin);
        arbitration.setVerifierUnbondingPeriod(10 days);
        _exit(verifiers[1]);
        assertEq(arbitration.verifierOf(verifiers[0]).releaseAt, block.timestamp + VERIFIER_UNBONDING);
        assertEq(arbitration.verifierOf(verifiers[1]).releaseAt, block.timestamp + 10 days);
    }

    // ---- which disputes a verifier votes on

    /// @dev Registered in the dispute's block: refused; one block earlier: counted. A verifier that exits keeps
    /// voting on disputes opened before its exit block, not on those opened in it or later, and none once its
    /// stake is withdrawn.
    function test_vote_eligibilityFollowsRegistrationAndExitBlocks() public {
        uint256 early = _openDispute(_committedTask(alice), 0);
        _register(carol, MIN_VERIFIER_STAKE);
        uint256 sameBlock = _openDispute(_committedTask(alice), 0);
        assertFalse(_votes(carol, early));
        assertFalse(_votes(carol, sameBlock));

        vm.roll(block.number + 1);
        uint256 later = _openDispute(_committedTask(alice), 0);
        assertTrue(_votes(carol, later));

        vm.roll(block.number + 1);
        uint256 beforeExit = _openDispute(_committedTask(alice), 0);
        vm.roll(block.number + 1);
        uint256 exitBlockDispute = _openDispute(_committedTask(alice), 0);
        _exit(carol);
        vm.roll(block.number + 1);
        uint256 afterExit = _openDispute(_committedTask(alice), 0);
        assertTrue(_votes(carol, beforeExit));
        assertFalse(_votes(carol, exitBlockDispute));
        assertFalse(_votes(carol, afterExit));

        uint256 stillOpen = _openDispute(_committedTask(alice), 0); // opened after the exit: refused anyway
        vm.warp(block.timestamp + VERIFIER_UNBONDING);
        vm.prank(carol);
        arbitration.withdrawVerifierStake();
        vm.prank(carol);
        vm.expectRevert(abi.encodeWithSelector(IA.NotVerifier.selector, carol));
        arbitration.vote(stillOpen, IA.Vote.MinersCorrect);
    }

    /// @dev Only the relative order of blocks matters: a verifier registered at block `r` votes on a dispute opened
    /// at block `o` iff `r < o`.
    function testFuzz_vote_registrationTiming(uint8 registerAfter, uint8 openAfter) public {
        uint256 start = block.number;
        uint256 r = start + registerAfter;
        uint256 o = start + openAfter;
        uint256 taskId = _committedTask(alice);
        uint256 disputeId;
        if (r <= o) {
            vm.roll(r);
            _register(carol, MIN_VERIFIER_STAKE);
            vm.roll(o);
            disputeId = _openDispute(taskId, 0);
        } else {
            vm.roll(o);
            disputeId = _openDispute(taskId, 0);
            vm.roll(r);
            _register(carol, MIN_VERIFIER_STAKE);
        }
        assertEq(arbitration.getDispute(disputeId).openedAtBlock, o);
        assertEq(arbitration.verifierOf(carol).registeredAtBlock, r);
        assertEq(_votes(carol, disputeId), r < o);
    }

    /// @dev A verifier (registered long before) that asks to exit at block `e` votes on a dispute opened at block
    /// `o` iff `o < e`; the stake is withdrawable exactly `verifierUnbondingPeriod` seconds after the request.
    function testFuzz_exitTiming(uint8 exitAfter, uint8 openAfter, uint256 wait, uint256 unbonding) public {
        unbonding = bound(unbonding, VOTING_PERIOD, 30 days);
        vm.prank(admin);
        arbitration.setVerifierUnbondingPeriod(unbonding);
        address v = verifiers[2];
        uint256 start = block.number;
        uint256 e = start + exitAfter;
        uint256 o = start + openAfter;
        uint256 taskId = _committedTask(alice);
        uint256 disputeId;
        if (o <= e) {
            vm.roll(o);
            disputeId = _openDispute(taskId, 0);
            vm.roll(e);
            _exit(v);
        } else {
            vm.roll(e);
            _exit(v);
            vm.roll(o);
            disputeId = _openDispute(taskId, 0);
        }
        uint256 requestedAt = block.timestamp;
        assertEq(_votes(v, disputeId), o < e);

        wait = bound(wait, 0, 2 * unbonding);
        vm.warp(requestedAt + wait);
        vm.prank(v);
        if (wait < unbonding) {
            vm.expectRevert(
                abi.encodeWithSelector(
                    IA.VerifierUnbondingNotFinished.selector, requestedAt + unbonding, requestedAt + wait
                )
            );
            arbitration.withdrawVerifierStake();
        } else {
            assertEq(arbitration.withdrawVerifierStake(), MIN_VERIFIER_STAKE);
        }
    }

    // ---- admin

    function test_setMinVerifierStake() public {
        vm.expectEmit(address(arbitration));
        emit IA.MinVerifierStakeChanged(1);
        vm.prank(admin);
        arbitration.setMinVerifierStake(1);
        assertEq(arbitration.minVerifierStake(), 1);
        _register(carol, 1);
        assertTrue(arbitration.isVerifier(carol));
        vm.prank(admin);
        arbitration.setMinVerifierStake(1_000e6);
        assertTrue(arbitration.isVerifier(carol), "registered verifiers stay");
        assertTrue(arbitration.isVerifier(verifiers[0]));

        vm.prank(admin);
        vm.expectRevert(IA.ZeroVerifierStake.selector);
        arbitration.setMinVerifierStake(0);
        vm.prank(stranger);
        vm.expectRevert(_unauthorized(stranger, 0x00));
        arbitration.setMinVerifierStake(1);
    }

    function test_setVerifierUnbondingPeriod() public {
        vm.expectEmit(address(arbitration));
        emit IA.VerifierUnbondingPeriodChanged(VOTING_PERIOD);
        vm.prank(admin);
        arbitration.setVerifierUnbondingPeriod(VOTING_PERIOD);
        assertEq(arbitration.verifierUnbondingPeriod(), VOTING_PERIOD);
        vm.startPrank(admin);
        arbitration.setVerifierUnbondingPeriod(30 days);
        vm.expectRevert(
            abi.encodeWithSelector(IA.VerifierUnbondingTooShort.selector, VOTING_PERIOD - 1, VOTING_PERIOD)
        );
        arbitration.setVerifierUnbondingPeriod(VOTING_PERIOD - 1);
        vm.expectRevert(abi.encodeWithSelector(IA.VerifierUnbondingTooLong.selector, 30 days + 1, 30 days));
        arbitration.setVerifierUnbondingPeriod(30 days + 1);
        vm.stopPrank();
        vm.prank(stranger);
        vm.expectRevert(_unauthorized(stranger, 0x00));
        arbitration.setVerifierUnbondingPeriod(VOTING_PERIOD);
    }
}
