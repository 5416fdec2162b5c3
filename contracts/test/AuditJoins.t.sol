// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {BaseTest} from "./BaseTest.sol";
import {IArbitration as IA} from "../src/interfaces/IArbitration.sol";
import {IAudits as IAu} from "../src/interfaces/IAudits.sol";
import {ITaskRegistry as IT} from "../src/interfaces/ITaskRegistry.sol";
import {ResultLeaf} from "../src/libraries/ResultLeaf.sol";
import {ResultTree} from "./utils/ResultTree.sol";

/// @notice The second review's class 6 (the audit's opener decides who is accountable) and 10(c) (free audits of
/// correct lines), written as the attacker's attempts: a cheater's sybil opens the audit of the cheater's line
/// first, showing only its honest partner's served proof; a sybil audits correct lines for free. Each test shows
/// the attempt fails and the exact balances of everyone honest.
contract AuditJoinsTest is BaseTest {
    IA.Vote internal constant AT_FAULT = IA.Vote.MinersAtFault;
    IA.Vote internal constant CORRECT = IA.Vote.MinersCorrect;

    address internal sybil = makeAddr("cheater's sybil verifier");
    address internal auditor = makeAddr("honest auditor");

    function setUp() public override {
        super.setUp();
        _registerAll();
        _registerVerifier(sybil, 2 * MIN_VERIFIER_STAKE);
        _registerVerifier(auditor, 2 * MIN_VERIFIER_STAKE);
        _newVerifiers("juror", 12, 1);
        _fund(bob, address(escrow), 10 * DISPUTE_BOND);
        vm.prank(bob);
        audits.fundAuditPool(10 * DISPUTE_BOND);
    }

    /// @dev A selected task whose audited line is served by the pipeline [m0, m1] (leaf 0 of the standard
    /// leaves), and that line's leaf, proof and served proofs.
    function _auditOfLineZero()
        internal
        returns (uint256 id, ResultLeaf.Leaf memory leaf, bytes32[] memory proof, bytes32[][] memory served)
    {
        id = _auditableTask();
        _selectLine(id, 0);
        ResultLeaf.Leaf[] memory leaves = _standardLeaves(id);
        (leaf, proof, served) = (leaves[0], _proofOf(leaves, 0), _servedProofs(leaves, 0));
    }

    /// @dev `served` with only the k-th proof kept (the others empty: those miners are not shown accountable).
    function _only(bytes32[][] memory served, uint256 k) internal pure returns (bytes32[][] memory kept) {
        kept = new bytes32[][](served.length);
        kept[k] = served[k];
    }

    /// @dev Miner m0 cheated on line 0, which it served with m1. Its sybil opens the audit first, showing only m1's
    /// served proof: m0 would walk away while m1 pays for it. The honest auditor, refused as second opener, joins
    /// the dispute with m0's proof; the jury convicts; both accountable miners lose their lock, the owner is
    /// refunded, the slash less the jurors' reward and the pool's bond go to the pool.
    function test_attack_openerLeavesTheCheaterOut_anyoneJoinsIt() public {
        (uint256 id, ResultLeaf.Leaf memory leaf, bytes32[] memory proof, bytes32[][] memory served) =
            _auditOfLineZero();
        vm.prank(sybil);
        uint256 d = audits.openAudit(id, leaf, proof, _only(served, 1));
        assertEq(arbitration.pipelineOf(d).length, 1);
        assertEq(arbitration.pipelineOf(d)[0], miners[1], "only the partner was shown");

        vm.prank(auditor);
        vm.expectRevert(abi.encodeWithSelector(IAu.AuditAlreadyOpened.selector, id, d));
        audits.openAudit(id, leaf, proof, served);
        vm.expectEmit(address(arbitration));
        emit IA.MinerJoined(d, miners[0], auditor);
        vm.prank(auditor);
        arbitration.joinDispute(d, leaf, proof, served);
        assertEq(arbitration.pipelineOf(d), _pair(miners[1], miners[0]), "the cheater joined");

        uint256 pool = escrow.auditPool();
        _decide(d, AT_FAULT);
        assertEq(_free(miners[0]), MINER_STAKE - STAKE_LOCK, "the cheater is slashed");
        assertEq(_free(miners[1]), MINER_STAKE - STAKE_LOCK, "so is the miner that vouched for its line");
        assertEq(_free(miners[2]), MINER_STAKE, "a miner of other lines is unlocked");
        uint256 slashed = 2 * STAKE_LOCK;
        uint256 reward = slashed / 10;
        assertEq(escrow.balanceOf(alice), MAX_PRICE, "the owner: refunded (a slash is no party's)");
        assertEq(
            escrow.auditPool(),
            pool + DISPUTE_BOND + slashed - reward,
            "the pool's bond back, and the slash's rest"
        );
        assertEq(audits.settleAudit(id), 0, "a conviction costs the opener nothing");
        assertEq(verifierRegistry.verifierOf(sybil).locked, 0);
        _assertEscrowSolvent();
    }

    /// @dev Joining adds only what a proof shows: a made-up served proof adds no one, a leaf other than the
    /// disputed one is refused, a miner already in adds nothing, and a resolved dispute cannot be joined. The
    /// owner's own dispute can be joined the same way.
    function test_joiningAddsOnlyProvenMinersOfTheDisputedLeaf() public {
        uint256 id = _committedTask(alice);
        ResultLeaf.Leaf[] memory leaves = _standardLeaves(id);
        bytes32[][] memory served = _servedProofs(leaves, 2); // leaf 2: [m0, m1, m2]
        _fund(alice, address(escrow), DISPUTE_BOND);
        vm.prank(alice);
        uint256 d = arbitration.openDispute(id, leaves[2], _proofOf(leaves, 2), _only(served, 2));
        assertEq(arbitration.pipelineOf(d).length, 1);

        bytes32[][] memory madeUp = _only(served, 2);
        madeUp[0] = new bytes32[](1);
        madeUp[0][0] = keccak256("made up");
        vm.recordLogs();
        vm.prank(stranger);
        arbitration.joinDispute(d, leaves[2], _proofOf(leaves, 2), madeUp);
        assertEq(vm.getRecordedLogs().length, 0, "nothing joined");
        assertEq(arbitration.pipelineOf(d).length, 1);

        bytes32 other = ResultTree.hashLeaf(leaves[0]);
        vm.expectRevert(abi.encodeWithSelector(IA.NotDisputedLeaf.selector, d, other));
        vm.prank(stranger);
        arbitration.joinDispute(d, leaves[0], _proofOf(leaves, 0), _servedProofs(leaves, 0));

        vm.prank(stranger);
        arbitration.joinDispute(d, leaves[2], _proofOf(leaves, 2), served);
        address[] memory pipeline = arbitration.pipelineOf(d);
        assertEq(pipeline.length, 3);
        (pipeline[0], pipeline[1], pipeline[2]) = (miners[2], miners[0], miners[1]);
        assertEq(arbitration.pipelineOf(d), pipeline, "every accountable miner, each once");
        vm.prank(stranger);
        arbitration.joinDispute(d, leaves[2], _proofOf(leaves, 2), served);
        assertEq(arbitration.pipelineOf(d).length, 3, "joining again adds nothing");

        _decide(d, CORRECT);
        vm.expectRevert(abi.encodeWithSelector(IA.DisputeNotOpen.selector, d));
        arbitration.joinDispute(d, leaves[2], _proofOf(leaves, 2), served);
    }

    /// @dev Class 10(c): a sybil verifier audits a correct line for nothing in return but the miners' delay. Its
    /// seat is locked while the audit runs, and once the jury finds the miners correct, settling the audit takes
    /// the seat's juror penalty from the sybil for the audit pool (not for the line's miners, who could be the
    /// sybil's own). The owner still pays the task as committed; the pool pays only the capped jurors' reward.
    function test_attack_freeAuditOfACorrectLineCostsTheOpener() public {
        (uint256 id, ResultLeaf.Leaf memory leaf, bytes32[] memory proof, bytes32[][] memory served) =
            _auditOfLineZero();
        vm.prank(sybil);
        uint256 d = audits.openAudit(id, leaf, proof, served);
        assertEq(verifierRegistry.verifierOf(sybil).locked, MIN_VERIFIER_STAKE, "one seat locked");
        vm.expectRevert(abi.encodeWithSelector(IAu.AuditStillOpen.selector, id, d));
        audits.settleAudit(id);

        _decide(d, CORRECT);
        uint256 pool = escrow.auditPool();
        uint256 penalty = MIN_VERIFIER_STAKE * PENALTY_BPS / 10_000;
        vm.expectEmit(address(audits));
        emit IAu.AuditSettled(id, sybil, penalty);
        assertEq(audits.settleAudit(id), penalty);
        assertEq(verifierRegistry.verifierOf(sybil).stake, 2 * MIN_VERIFIER_STAKE - penalty);
        assertEq(verifierRegistry.verifierOf(sybil).locked, 0, "the seat is free again");
        assertEq(escrow.auditPool(), pool + penalty, "the penalty to the pool");
        assertEq(escrow.balanceOf(miners[0]) + escrow.balanceOf(miners[1]), 0, "nothing to the line's miners");
        vm.expectRevert(abi.encodeWithSelector(IAu.AuditAlreadySettled.selector, id));
        audits.settleAudit(id);

        vm.warp(tasks.challengeEndsAt(id));
        tasks.finalizeTask(id);
        assertEq(uint8(_status(id)), uint8(IT.TaskStatus.Finalized), "the task pays as committed");
        _assertEscrowSolvent();
    }

    /// @dev An opener without a free seat cannot open an audit: audits are bounded by the stake behind them, so
    /// a sybil's free audits cost it capital locked for as long as each runs; an exiting verifier opens none.
    function test_attack_auditsNeedAFreeSeatEach() public {
        address poor = makeAddr("one-seat verifier");
        _registerVerifier(poor, MIN_VERIFIER_STAKE);
        (uint256 first, ResultLeaf.Leaf memory leaf, bytes32[] memory proof, bytes32[][] memory served) =
            _auditOfLineZero();
        this.openAs(poor, first, leaf, proof, served);
        assertEq(verifierRegistry.verifierOf(poor).locked, MIN_VERIFIER_STAKE);
        (uint256 second, ResultLeaf.Leaf memory leaf2, bytes32[] memory proof2, bytes32[][] memory served2) =
            _auditOfLineZero();
        vm.expectRevert(abi.encodeWithSelector(IAu.AuditorStakeBusy.selector, poor, MIN_VERIFIER_STAKE));
        this.openAs(poor, second, leaf2, proof2, served2);
        vm.prank(poor);
        verifierRegistry.requestExit();
        vm.expectRevert(abi.encodeWithSelector(IA.NotVerifierOfModel.selector, poor, MODEL));
        this.openAs(poor, second, leaf2, proof2, served2);
        assertEq(audits.auditOf(second).disputeId, 0, "still open to an honest auditor");
        this.openAs(auditor, second, leaf2, proof2, served2);
    }

    function openAs(
        address who,
        uint256 id,
        ResultLeaf.Leaf calldata leaf,
        bytes32[] calldata proof,
        bytes32[][] calldata served
    ) external returns (uint256) {
        vm.prank(who);
        return audits.openAudit(id, leaf, proof, served);
    }
}
