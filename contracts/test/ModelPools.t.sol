// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {BaseTest} from "./BaseTest.sol";
import {IArbitration as IA} from "../src/interfaces/IArbitration.sol";
import {IVerifierRegistry as IV} from "../src/interfaces/IVerifierRegistry.sol";

/// @notice Juries per model (class 7 of the second review): a verifier judges only the models it registered, and a
/// dispute draws its jurors from its task's model's pool alone. The attack was a cartel creating a task of a model
/// no honest verifier runs, disputing a correct line and appealing to 23 seats: every honest juror drawn had to
/// stay silent (it cannot re-run the model) and lost a silent seat's penalty to the cartel's coherent seats.
contract ModelPoolsTest is BaseTest {
    IA.Vote internal constant CORRECT = IA.Vote.MinersCorrect;

    address[] internal honest; // one-seat verifiers of MODEL only, beside setUp's
    address[] internal others; // one-seat verifiers of OTHER_MODEL only
    address internal cartelOwner = makeAddr("cartelOwner");

    function setUp() public override {
        super.setUp();
        _registerAll();
        honest = _newVerifiers("honest", 30, 1);
        others = new address[](60);
        for (uint256 i = 0; i < others.length; ++i) {
            others[i] = makeAddr(string.concat("other", vm.toString(i)));
            _registerVerifier(others[i], MIN_VERIFIER_STAKE, _models(OTHER_MODEL));
        }
        vm.roll(block.number + 1);
    }

    /// @dev Every verifier of MODEL: setUp's and the one-seat ones.
    function _modelVerifiers() internal view returns (address[] memory all) {
        all = new address[](verifiers.length + honest.length);
        for (uint256 i = 0; i < verifiers.length; ++i) {
            all[i] = verifiers[i];
        }
        for (uint256 i = 0; i < honest.length; ++i) {
            all[verifiers.length + i] = honest[i];
        }
    }

    /// @dev The farming attack: a task of OTHER_MODEL, a correct line disputed by its owner, and every round
    /// appealed as far as it goes (5, 11 and 23 seats). No juror of any round is a verifier of MODEL alone; each
    /// of them keeps exactly its stake, nothing locked, and MODEL's pool keeps its weight.
    function test_attack_aTaskOfAnotherModelNeverSeatsAVerifierThatDoesNotJudgeIt() public {
        address[] memory bystanders = _modelVerifiers();
        uint256[] memory stakes = new uint256[](bystanders.length);
        for (uint256 i = 0; i < bystanders.length; ++i) {
            stakes[i] = verifierRegistry.verifierOf(bystanders[i]).stake;
        }
        uint256 modelWeight = verifierRegistry.totalWeight(MODEL);

        uint256 id = _committedTaskOf(cartelOwner, OTHER_MODEL);
        uint256 d = _openDispute(id, 0); // a correct line
        assertEq(arbitration.getDispute(d).modelId, OTHER_MODEL);
        uint256 seated;
        for (uint8 r = 0; r < 3; ++r) {
            address[] memory jurors = _runRound(d, CORRECT);
            assertEq(
                arbitration.roundOf(d, r).weightTotal, others.length, "the round reads OTHER_MODEL's pool"
            );
            for (uint256 j = 0; j < jurors.length; ++j) {
                assertTrue(verifierRegistry.judges(jurors[j], OTHER_MODEL), "a juror of the task's model");
                assertFalse(_in(bystanders, jurors[j]), "a verifier of another model seated");
                seated += _seats(d, r, jurors[j]);
            }
            if (r < 2) _appeal(d, cartelOwner); // the challenger lost the round and appeals
        }
        assertEq(seated, 5 + 11 + 23, "every round seated in full from the model's own pool");
        _warpPastAppeal(d);
        arbitration.resolve(d);
        assertEq(uint8(arbitration.getDispute(d).status), uint8(IA.DisputeStatus.MinersCorrect));

        for (uint256 i = 0; i < bystanders.length; ++i) {
            IV.Verifier memory v = verifierRegistry.verifierOf(bystanders[i]);
            assertEq(v.stake, stakes[i], "a verifier of another model lost stake");
            assertEq(v.locked, 0);
        }
        assertEq(verifierRegistry.totalWeight(MODEL), modelWeight);
    }

    /// @dev The same on MODEL's side: a dispute of a MODEL task never seats a verifier of OTHER_MODEL alone.
    function test_aTaskOfTheModelSeatsOnlyItsVerifiers() public {
        uint256 id = _committedTaskOf(alice, MODEL);
        uint256 d = _openDispute(id, 1);
        address[] memory jurors = _drawJury(d);
        assertEq(jurors.length > 0, true);
        for (uint256 j = 0; j < jurors.length; ++j) {
            assertTrue(verifierRegistry.judges(jurors[j], MODEL));
            assertFalse(_in(others, jurors[j]));
        }
    }

    /// @dev An auditor must judge the audited task's model: a verifier of OTHER_MODEL alone cannot open (and so
    /// cannot steer) the audit of a MODEL task, which stays open to one that judges it.
    function test_attack_anAuditorOfAnotherModelCannotOpenTheAudit() public {
        uint256 id = _auditableTask();
        _selectedAudit(id);
        vm.expectRevert(abi.encodeWithSelector(IA.NotVerifierOfModel.selector, others[0], MODEL));
        this.openAuditAs(id, others[0]);
        assertEq(audits.auditOf(id).disputeId, 0);
        this.openAuditAs(id, honest[0]);
        assertEq(arbitration.getDispute(audits.auditOf(id).disputeId).modelId, MODEL);
    }

    function openAuditAs(uint256 id, address auditor) external returns (uint256) {
        return _openAudit(id, auditor);
    }

    /// @dev A verifier of both models has its weight in both pools; leaving one takes it out of that pool from
    /// that block on (a round opened before still reads it), joining again restores it, and an exit leaves every
    /// pool at once.
    function test_aVerifierOfTwoModelsWeighsInBothAndLeavesEachOnItsOwn() public {
        address both = makeAddr("both");
        bytes32[] memory two = new bytes32[](2);
        (two[0], two[1]) = (MODEL, OTHER_MODEL);
        uint256 modelWeight = verifierRegistry.totalWeight(MODEL);
        _registerVerifier(both, 3 * MIN_VERIFIER_STAKE, two);
        assertEq(verifierRegistry.totalWeight(MODEL), modelWeight + 3);
        assertEq(verifierRegistry.totalWeight(OTHER_MODEL), others.length + 3);
        assertEq(verifierRegistry.modelsOf(both), two);

        vm.roll(block.number + 1);
        uint256 id = _committedTaskOf(alice, OTHER_MODEL);
        uint256 d = _openDispute(id, 0); // opened while `both` judges OTHER_MODEL
        vm.roll(block.number + 1);
        vm.prank(both);
        verifierRegistry.removeModel(OTHER_MODEL);
        assertFalse(verifierRegistry.judges(both, OTHER_MODEL));
        assertTrue(verifierRegistry.judges(both, MODEL));
        assertEq(verifierRegistry.totalWeight(OTHER_MODEL), others.length);
        assertEq(verifierRegistry.modelsOf(both), _models(MODEL));
        assertEq(arbitration.roundOf(d, 0).weightTotal, others.length + 3, "the open round keeps its pool");

        vm.expectRevert(abi.encodeWithSelector(IV.NotJudgingModel.selector, both, OTHER_MODEL));
        vm.prank(both);
        verifierRegistry.removeModel(OTHER_MODEL);
        vm.prank(both);
        verifierRegistry.addModel(OTHER_MODEL);
        assertEq(verifierRegistry.totalWeight(OTHER_MODEL), others.length + 3, "restored in its own place");

        vm.prank(both);
        verifierRegistry.requestExit();
        assertEq(verifierRegistry.totalWeight(MODEL), modelWeight);
        assertEq(verifierRegistry.totalWeight(OTHER_MODEL), others.length);
        assertFalse(verifierRegistry.judges(both, MODEL));
        vm.expectRevert(abi.encodeWithSelector(IV.NotVerifier.selector, both));
        vm.prank(both);
        verifierRegistry.addModel(UNSUPPORTED_MODEL);
    }

    /// @dev Registrations name 1 to MAX_MODELS distinct, non-zero models.
    function test_registrationRefusesBadModelLists() public {
        address v = makeAddr("v");
        _fund(v, address(verifierRegistry), MIN_VERIFIER_STAKE);
        vm.startPrank(v);
        vm.expectRevert(IV.NoModels.selector);
        verifierRegistry.register(MIN_VERIFIER_STAKE, new bytes32[](0));
        vm.expectRevert(IV.ZeroModel.selector);
        verifierRegistry.register(MIN_VERIFIER_STAKE, new bytes32[](1));
        bytes32[] memory twice = new bytes32[](2);
        (twice[0], twice[1]) = (MODEL, MODEL);
        vm.expectRevert(abi.encodeWithSelector(IV.AlreadyJudgingModel.selector, v, MODEL));
        verifierRegistry.register(MIN_VERIFIER_STAKE, twice);
        uint256 max = verifierRegistry.MAX_MODELS();
        bytes32[] memory many = new bytes32[](max + 1);
        for (uint256 i = 0; i < many.length; ++i) {
            many[i] = bytes32(i + 1);
        }
        vm.expectRevert(abi.encodeWithSelector(IV.TooManyModels.selector, max + 1, max));
        verifierRegistry.register(MIN_VERIFIER_STAKE, many);
        vm.stopPrank();
        assertEq(verifierRegistry.verifierOf(v).stake, 0, "nothing registered");
        assertEq(token.balanceOf(v), MIN_VERIFIER_STAKE, "nothing taken");
    }
}
