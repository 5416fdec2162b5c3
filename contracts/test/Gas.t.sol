// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {BaseTest} from "./BaseTest.sol";
import {Headers} from "./utils/Headers.sol";
import {IArbitration} from "../src/interfaces/IArbitration.sol";
import {ITaskRegistry} from "../src/interfaces/ITaskRegistry.sol";
import {ResultLeaf} from "../src/libraries/ResultLeaf.sol";

/// @notice Gas per task does not depend on the number of requests in the batch: the contracts keep only roots,
/// hashes and counters. Gas metering is paused except around the four protocol calls, so each test's snapshot entry
/// is the gas of one task's create, assign, commit and finalize (less same-transaction refunds), plus the test
/// contract's own selector dispatch, which differs by a few dozen gas at most between test names. The verifier and
/// audit entries measure one call each the same way (registerVerifier, drawAudit, sealAudit of a selected task, the
/// dearer case, and openAudit), as do the dispute entries (openDispute, drawJury, one commitVote and revealVote,
/// an appeal, and resolve of the dearer "at fault" outcome, which slashes and pays), after making the contracts' storage cold again, as in a
/// transaction of its own (less the 21,000 base and calldata).
contract GasTest is BaseTest {
    function setUp() public override {
        super.setUp();
        _registerAll();
    }

    /// @notice Gas of createTask, assignTask, commitResults and finalizeTask for one task of `requestCount`
    /// requests, measured with gasleft(); preparation is not counted. External, so that every measurement starts
    /// with fresh memory (memory expansion in the caller would otherwise differ between runs).
    function lifecycle(uint32 requestCount) external returns (uint256 used) {
        ITaskRegistry.CreateTaskParams memory p = _taskParams(MAX_PRICE);
        p.requestCount = requestCount;
        _fund(alice, address(escrow), MAX_PRICE);
        uint256 id = tasks.taskCount() + 1;
        address[] memory assigned = _miners(3);
        ITaskRegistry.Commitment memory c = _commitment(keccak256("results"), PAYMENT, 3);

        vm.prank(alice);
        vm.resumeGasMetering();
        uint256 g = gasleft();
        tasks.createTask(p);
        used = g - gasleft();
        vm.pauseGasMetering();

        vm.prank(coordinator);
        vm.resumeGasMetering();
        g = gasleft();
        tasks.assignTask(id, assigned, STAKE_LOCK, _acceptances(tasks, id, assigned, STAKE_LOCK));
        used += g - gasleft();
        vm.pauseGasMetering();
        bytes[] memory sigs = _signaturesOf(id, c, assigned); // over the task as assigned

        vm.prank(coordinator);
        vm.resumeGasMetering();
        g = gasleft();
        tasks.commitResults(id, c, sigs);
        used += g - gasleft();
        vm.pauseGasMetering();

        vm.warp(block.timestamp + CHALLENGE_WINDOW);
        vm.resumeGasMetering();
        g = gasleft();
        tasks.finalizeTask(id);
        used += g - gasleft();
        vm.pauseGasMetering();

        assertEq(tasks.getTask(id).requestCount, requestCount);
        assertEq(uint8(tasks.getTask(id).status), uint8(ITaskRegistry.TaskStatus.Finalized));
    }

    function test_gas_lifecycle_10_requests() public {
        vm.pauseGasMetering();
        this.lifecycle(10);
    }

    function test_gas_lifecycle_50000_requests() public {
        vm.pauseGasMetering();
        this.lifecycle(50_000);
    }

    /// @dev The exact comparison: each run from the same state, 10 vs 50,000 vs 2^32 - 1 requests.
    function test_gas_lifecycle_independentOfRequestCount() public {
        vm.pauseGasMetering();
        uint256 snap = vm.snapshotState();
        uint256 small = this.lifecycle(10);
        vm.revertToState(snap);
        uint256 large = this.lifecycle(50_000);
        vm.revertToState(snap);
        uint256 largest = this.lifecycle(type(uint32).max);
        assertEq(small, large);
        assertEq(small, largest);
        assertGt(small, 0);
    }

    // ---- verifiers and audits

    /// @dev A committed task of four requests, one standard leaf each, selected for an audit (rate 100%), with the
    /// pool able to post its bond. Metering stays paused.
    function _fundedAuditableTask() internal returns (uint256 id) {
        _fund(bob, address(escrow), DISPUTE_BOND);
        vm.prank(bob);
        audits.fundAuditPool(DISPUTE_BOND);
        id = _auditableTask();
    }

    /// @dev Storage the preparation touched is cold again, as for a call in a transaction of its own.
    function _cool() internal {
        vm.cool(address(token));
        vm.cool(address(registry));
        vm.cool(address(escrow));
        vm.cool(address(tasks));
        vm.cool(address(arbitration));
        vm.cool(address(verifierRegistry));
    }

    function _drawn(uint256 id) internal {
        audits.drawAudit(id);
        _mineSeed(id, keccak256("the seed block's mix hash"));
    }

    function registerVerifierGas() external returns (uint256 used) {
        address v = makeAddr("new verifier");
        _fund(v, address(verifierRegistry), MIN_VERIFIER_STAKE);
        _cool();
        vm.prank(v);
        vm.resumeGasMetering();
        uint256 g = gasleft();
        verifierRegistry.register(MIN_VERIFIER_STAKE, _models(MODEL));
        used = g - gasleft();
        vm.pauseGasMetering();
        assertTrue(verifierRegistry.isVerifier(v));
    }

    function drawAuditGas() external returns (uint256 used) {
        uint256 id = _fundedAuditableTask();
        _cool();
        vm.resumeGasMetering();
        uint256 g = gasleft();
        audits.drawAudit(id);
        used = g - gasleft();
        vm.pauseGasMetering();
        assertEq(audits.auditOf(id).seedBlock, block.number + 4);
    }

    function sealAuditGas() external returns (uint256 used) {
        uint256 id = _fundedAuditableTask();
        _drawn(id);
        _cool();
        vm.resumeGasMetering();
        uint256 g = gasleft();
        audits.sealAudit(id);
        used = g - gasleft();
        vm.pauseGasMetering();
        assertTrue(audits.auditOf(id).selected);
    }

    function openAuditGas() external returns (uint256 used) {
        uint256 id = _fundedAuditableTask();
        _drawn(id);
        audits.sealAudit(id);
        uint256 line = audits.auditOf(id).requestIndex;
        ResultLeaf.Leaf[] memory ls = _standardLeaves(id);
        bytes32[] memory proof = _proofOf(ls, line);
        bytes32[][] memory served = _servedProofs(ls, line);
        _cool();
        vm.prank(verifiers[0]);
        vm.resumeGasMetering();
        uint256 g = gasleft();
        audits.openAudit(id, ls[line], proof, served);
        used = g - gasleft();
        vm.pauseGasMetering();
        assertTrue(arbitration.getDispute(audits.auditOf(id).disputeId).audit);
    }

    // ---- disputes

    /// @dev A committed task of four requests whose owner can post the bond; line 0's leaf and proofs. Metering
    /// stays paused.
    function _disputable()
        internal
        returns (uint256 id, ResultLeaf.Leaf memory leaf, bytes32[] memory proof, bytes32[][] memory served)
    {
        ITaskRegistry.CreateTaskParams memory p = _taskParams(MAX_PRICE);
        p.requestCount = 4;
        _fund(alice, address(escrow), MAX_PRICE + DISPUTE_BOND);
        vm.prank(alice);
        id = tasks.createTask(p);
        _assign(id, _miners(3));
        ResultLeaf.Leaf[] memory ls = _standardLeaves(id);
        _commitLeaves(id, ls);
        leaf = ls[0];
        proof = _proofOf(ls, 0);
        served = _servedProofs(ls, 0);
    }

    function _opened() internal returns (uint256 disputeId) {
        (uint256 id, ResultLeaf.Leaf memory leaf, bytes32[] memory proof, bytes32[][] memory served) =
            _disputable();
        vm.prank(alice);
        disputeId = arbitration.openDispute(id, leaf, proof, served);
        vm.roll(block.number + 1);
    }

    function openDisputeGas() external returns (uint256 used) {
        (uint256 id, ResultLeaf.Leaf memory leaf, bytes32[] memory proof, bytes32[][] memory served) =
            _disputable();
        _cool();
        vm.prank(alice);
        vm.resumeGasMetering();
        uint256 g = gasleft();
        arbitration.openDispute(id, leaf, proof, served);
        used = g - gasleft();
        vm.pauseGasMetering();
        assertEq(arbitration.disputeOfTask(id), arbitration.disputeCount());
    }

    /// @dev A drawn round-0 jury (every juror) for an opened dispute.
    function _drawnJury() internal returns (uint256 disputeId, address[] memory jurors) {
        disputeId = _opened();
        jurors = _drawJury(disputeId);
    }

    function drawJuryGas() external returns (uint256 used) {
        uint256 disputeId = _opened();
        IArbitration.Round memory round = arbitration.roundOf(disputeId, 0);
        vm.roll(round.seedBlock + 1);
        _setSeed(round.seedBlock, keccak256("the seed block"));
        _cool();
        vm.resumeGasMetering();
        uint256 g = gasleft();
        arbitration.drawJury(disputeId);
        used = g - gasleft();
        vm.pauseGasMetering();
        assertGt(arbitration.roundOf(disputeId, 0).seatsDrawn, 0);
    }

    function commitVoteGas() external returns (uint256 used) {
        (uint256 disputeId, address[] memory jurors) = _drawnJury();
        bytes32 c =
            arbitration.voteCommitment(disputeId, 0, jurors[0], IArbitration.Vote.MinersAtFault, "salt");
        _cool();
        vm.prank(jurors[0]);
        vm.resumeGasMetering();
        uint256 g = gasleft();
        arbitration.commitVote(disputeId, c);
        used = g - gasleft();
        vm.pauseGasMetering();
        assertEq(arbitration.jurorOf(disputeId, 0, jurors[0]).commitment, c);
    }

    function revealVoteGas() external returns (uint256 used) {
        (uint256 disputeId, address[] memory jurors) = _drawnJury();
        _commitVote(disputeId, jurors[0], IArbitration.Vote.MinersAtFault);
        vm.warp(arbitration.roundOf(disputeId, 0).commitDeadline);
        _cool();
        vm.prank(jurors[0]);
        vm.resumeGasMetering();
        uint256 g = gasleft();
        arbitration.revealVote(disputeId, IArbitration.Vote.MinersAtFault, _salt(jurors[0]));
        used = g - gasleft();
        vm.pauseGasMetering();
        assertGt(arbitration.roundOf(disputeId, 0).votesAtFault, 0);
    }

    /// @dev The miners of line 0's pipeline appeal a round-0 conviction.
    function appealGas() external returns (uint256 used) {
        uint256 disputeId = _opened();
        _runRound(disputeId, IArbitration.Vote.MinersAtFault);
        _fund(miners[0], address(escrow), 2 * DISPUTE_BOND);
        _cool();
        vm.prank(miners[0]);
        vm.resumeGasMetering();
        uint256 g = gasleft();
        arbitration.appeal(disputeId);
        used = g - gasleft();
        vm.pauseGasMetering();
        assertEq(arbitration.getDispute(disputeId).round, 1);
    }

    /// @dev The dearer "at fault" outcome: slashes, refunds, and pays every juror.
    function resolveGas() external returns (uint256 used) {
        uint256 disputeId = _opened();
        _runRound(disputeId, IArbitration.Vote.MinersAtFault);
        _warpPastAppeal(disputeId);
        _cool();
        vm.resumeGasMetering();
        uint256 g = gasleft();
        arbitration.resolve(disputeId);
        used = g - gasleft();
        vm.pauseGasMetering();
        assertEq(
            uint8(arbitration.getDispute(disputeId).status), uint8(IArbitration.DisputeStatus.MinersAtFault)
        );
    }

    function refuteUsageGas() external returns (uint256 used) {
        (uint256 id, ResultLeaf.Leaf[] memory ls) = _overchargedTask(100_000);
        bytes32[] memory proof = _proofOf(ls, 1);
        _cool();
        vm.resumeGasMetering();
        uint256 g = gasleft();
        tasks.refuteUsage(id, ls[1], proof);
        used = g - gasleft();
        vm.pauseGasMetering();
        assertEq(uint8(tasks.getTask(id).status), uint8(ITaskRegistry.TaskStatus.Finalized));
    }

    function test_gas_refuteUsage() public {
        vm.pauseGasMetering();
        this.refuteUsageGas();
    }

    function test_gas_openDispute() public {
        vm.pauseGasMetering();
        this.openDisputeGas();
    }

    function test_gas_drawJury() public {
        vm.pauseGasMetering();
        this.drawJuryGas();
    }

    function test_gas_commitVote() public {
        vm.pauseGasMetering();
        this.commitVoteGas();
    }

    function test_gas_revealVote() public {
        vm.pauseGasMetering();
        this.revealVoteGas();
    }

    function test_gas_appeal() public {
        vm.pauseGasMetering();
        this.appealGas();
    }

    function test_gas_resolve() public {
        vm.pauseGasMetering();
        this.resolveGas();
    }

    function test_gas_registerVerifier() public {
        vm.pauseGasMetering();
        this.registerVerifierGas();
    }

    function test_gas_drawAudit() public {
        vm.pauseGasMetering();
        this.drawAuditGas();
    }

    function proveRandomnessGas() external returns (uint256 used) {
        vm.roll(block.number + 10);
        bytes memory header = Headers.withMixHash(keccak256("a mix hash"));
        vm.setBlockhash(block.number - 1, keccak256(header));
        _cool();
        vm.resumeGasMetering();
        uint256 g = gasleft();
        randomness.prove(block.number - 1, header);
        used = g - gasleft();
        vm.pauseGasMetering();
        assertEq(randomness.valueOf(block.number - 1), keccak256("a mix hash"));
    }

    /// @dev A round's or an audit's seed: one header proven per seed block (a short test header; a real one,
    /// about 600 bytes, adds its calldata).
    function test_gas_proveRandomness() public {
        vm.pauseGasMetering();
        this.proveRandomnessGas();
    }

    function test_gas_sealAudit() public {
        vm.pauseGasMetering();
        this.sealAuditGas();
    }

    function test_gas_openAudit() public {
        vm.pauseGasMetering();
        this.openAuditGas();
    }
}
