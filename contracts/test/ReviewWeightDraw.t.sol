// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {BaseTest} from "./BaseTest.sol";
import {IArbitration as IA} from "../src/interfaces/IArbitration.sol";
import {IVerifierRegistry as IV} from "../src/interfaces/IVerifierRegistry.sol";
import {console} from "forge-std/console.sol";

contract ReviewWeightDrawTest is BaseTest {
    IA.Vote internal constant CORRECT = IA.Vote.MinersCorrect;
    IA.Vote internal constant AT_FAULT = IA.Vote.MinersAtFault;

    address internal sybil = makeAddr("sybil");

    function setUp() public override {
        super.setUp();
        _registerAll();
    }

    function _stake(address v) internal view returns (uint256) {
        return verifierRegistry.verifierOf(v).stake;
    }

    function _lockedOf(address v) internal view returns (uint256) {
        return verifierRegistry.verifierOf(v).locked;
    }

    function _two(bytes32 a, bytes32 b) internal pure returns (bytes32[] memory list) {
        list = new bytes32[](2);
        (list[0], list[1]) = (a, b);
    }

    /// @dev `v`, alone in OTHER_MODEL's pool, takes all five seats of a dispute there and stays silent.
    function _penalizeAlone(address v) internal {
        uint256 d = _openDispute(_committedTaskOf(alice, OTHER_MODEL), 1);
        _drawJury(d);
        assertEq(_seats(d, 0, v), 5);
        vm.warp(arbitration.roundOf(d, 0).appealDeadline);
        arbitration.resolve(d);
    }

    function test_explore_refresh() public {
        _registerVerifier(sybil, 10 * MIN_VERIFIER_STAKE, _two(MODEL, OTHER_MODEL));
        vm.roll(block.number + 1);
        _penalizeAlone(sybil);
        assertEq(_stake(sybil), 750e6);
        uint256 d = _openDispute(_committedTask(bob), 1);
        (, IA.Round memory round) = _round(d);
        vm.roll(round.seedBlock + 1);
        uint256 plain;
        uint256 refreshed;
        for (uint256 i = 0; i < 60; ++i) {
            uint256 snap = vm.snapshotState();
            _setSeed(round.seedBlock, keccak256(abi.encode("jury", i)));
            arbitration.drawJury(d);
            uint256 a = _seats(d, 0, sybil);
            vm.revertToState(snap);
            snap = vm.snapshotState();
            _setSeed(round.seedBlock, keccak256(abi.encode("jury", i)));
            vm.startPrank(sybil);
            verifierRegistry.removeModel(MODEL);
            verifierRegistry.addModel(MODEL);
            vm.stopPrank();
            arbitration.drawJury(d);
            uint256 b = _seats(d, 0, sybil);
            vm.revertToState(snap);
            plain += a;
            refreshed += b;
            if (a < 3 && b >= 3) console.log("flip", i, a, b);
        }
        console.log(plain, refreshed);
    }

    function test_explore_order() public {
        _registerVerifier(sybil, 3 * MIN_VERIFIER_STAKE);
        vm.roll(block.number + 1);
        uint256 d1 = _openDispute(_committedTask(alice), 1);
        address[] memory j1 = _drawJury(d1);
        IA.Vote[] memory votes = new IA.Vote[](j1.length);
        for (uint256 i = 0; i < j1.length; ++i) {
            votes[i] = j1[i] == sybil ? AT_FAULT : IA.Vote.None;
        }
        _runRoundWith(d1, j1, votes);
        for (uint256 i = 0; i < j1.length; ++i) console.log(j1[i], _seats(d1, 0, j1[i]));
        IA.Round memory r1 = arbitration.roundOf(d1, 0);
        vm.warp(r1.appealDeadline - 1 hours);
        uint256 d2 = _openDispute(_committedTask(bob), 1);
        (, IA.Round memory round) = _round(d2);
        vm.roll(round.seedBlock + 1);
        vm.warp(r1.appealDeadline);
        uint256 plain;
        uint256 resolvedFirst;
        for (uint256 i = 0; i < 60; ++i) {
            uint256 snap = vm.snapshotState();
            _setSeed(round.seedBlock, keccak256(abi.encode("jury", i)));
            arbitration.drawJury(d2);
            uint256 a = _seats(d2, 0, sybil);
            vm.revertToState(snap);
            snap = vm.snapshotState();
            _setSeed(round.seedBlock, keccak256(abi.encode("jury", i)));
            arbitration.resolve(d1);
            arbitration.drawJury(d2);
            uint256 b = _seats(d2, 0, sybil);
            vm.revertToState(snap);
            plain += a;
            resolvedFirst += b;
            if (a < 3 && b >= 3) console.log("flip", i, a, b);
        }
        console.log(plain, resolvedFirst);
    }

    address internal whale = makeAddr("deadWhale");
    address internal cartelOwner = makeAddr("cartelOwner");

    function _voteAll(uint256 d, address voter, IA.Vote choice) internal {
        address[] memory j = _drawJury(d);
        IA.Vote[] memory votes = new IA.Vote[](j.length);
        for (uint256 i = 0; i < j.length; ++i) {
            votes[i] = j[i] == voter ? choice : IA.Vote.None;
        }
        _runRoundWith(d, j, votes);
    }

    function test_explore_dead() public {
        _registerVerifier(whale, 10 * MIN_VERIFIER_STAKE, _models(OTHER_MODEL));
        _registerVerifier(sybil, MIN_VERIFIER_STAKE, _models(OTHER_MODEL));
        vm.roll(block.number + 1);
        uint256 d = _openDispute(_committedTaskOf(cartelOwner, OTHER_MODEL), 1);
        _voteAll(d, sybil, CORRECT);
        _appeal(d, cartelOwner);
        _voteAll(d, sybil, CORRECT);
        _appeal(d, cartelOwner);
        _voteAll(d, sybil, CORRECT);
        for (uint8 r = 0; r < 3; ++r) console.log(r, _seats(d, r, whale), _seats(d, r, sybil));
        arbitration.resolve(d);
        console.log(uint8(arbitration.getDispute(d).status), _stake(whale), escrow.balanceOf(sybil));
        address hA = makeAddr("honestA");
        address hB = makeAddr("honestB");
        _registerVerifier(hA, MIN_VERIFIER_STAKE, _models(OTHER_MODEL));
        _registerVerifier(hB, MIN_VERIFIER_STAKE, _models(OTHER_MODEL));
        vm.roll(block.number + 1);
        uint256 t = _openDispute(_committedTaskOf(bob, OTHER_MODEL), 1);
        (, IA.Round memory round) = _round(t);
        vm.roll(round.seedBlock + 1);
        for (uint256 i = 0; i < 30; ++i) {
            uint256 snap = vm.snapshotState();
            _setSeed(round.seedBlock, keccak256(abi.encode("jury", i)));
            arbitration.drawJury(t);
            console.log(i, arbitration.roundOf(t, 0).seatsDrawn, _seats(t, 0, sybil));
            vm.revertToState(snap);
        }
    }
}
