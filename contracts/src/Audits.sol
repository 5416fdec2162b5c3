// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {SafeCast} from "@openzeppelin/contracts/utils/math/SafeCast.sol";
import {IArbitration} from "./interfaces/IArbitration.sol";
import {IAudits} from "./interfaces/IAudits.sol";
import {IPaymentEscrow} from "./interfaces/IPaymentEscrow.sol";
import {ITaskRegistry} from "./interfaces/ITaskRegistry.sol";
import {IVerifierRegistry} from "./interfaces/IVerifierRegistry.sol";
import {IRandomness, SEED_DELAY_BLOCKS} from "./interfaces/IRandomness.sol";
import {ResultLeaf} from "./libraries/ResultLeaf.sol";

/// @title Audits
/// @notice Random audits paid from the audit pool. Anyone draws a committed task's audit inside its challenge
/// window; the random value of a block just after the draw decides whether it is selected and which line. An
/// active verifier that is not a party opens the audit's dispute over that line (Arbitration runs it, its bond from the pool), locking one
/// seat of its own stake until the dispute is resolved: if the miners are found correct, or the opener leaves the
/// jury undrawn, the seat's juror penalty goes to the audit pool, so auditing correct lines on purpose costs the
/// opener (the line's miners could be its own: paying them would cost nothing), and an abandoned audit is opened
/// again by the next verifier. Audits never use or block the owner's dispute; the owner's window is extended by
/// the time an audit ran.
///
/// A draw's seed is the random value (`IRandomness`: `prevrandao`) of a block a few blocks after the draw, which
/// must be proven while the EVM still knows that block's hash (256 blocks). A seed that can no longer become known
/// draws the audit again, and the new draw is selected whatever its seed says: letting a seed expire can only get
/// a task audited, never spare it.
/// @dev Opens disputes with Arbitration's audits role; locks and releases the opener's seat with the verifier
/// registry's arbiter role; pays penalties through the escrow's arbiter role. It has no owner.
contract Audits is IAudits {
    using SafeCast for uint256;

    uint256 private constant BPS = 10_000;

    IArbitration public immutable arbitration;
    ITaskRegistry public immutable taskRegistry;
    IVerifierRegistry public immutable verifiers;
    IPaymentEscrow public immutable escrow;
    /// @notice Where audits' seeds come from.
    IRandomness public immutable randomness;

    mapping(uint256 taskId => Audit) private _audits;

    constructor(
        IArbitration arbitration_,
        ITaskRegistry taskRegistry_,
        IVerifierRegistry verifiers_,
        IPaymentEscrow escrow_,
        IRandomness randomness_
    ) {
        arbitration = arbitration_;
        taskRegistry = taskRegistry_;
        verifiers = verifiers_;
        escrow = escrow_;
        randomness = randomness_;
    }

    /// @inheritdoc IAudits
    /// @dev The caller must have approved the escrow for `amount`.
    function fundAuditPool(uint256 amount) external {
        escrow.fundAuditPool(msg.sender, amount);
    }

    /// @inheritdoc IAudits
    /// @dev Anyone, once per task, while the task is committed and inside its challenge window. The random value
    /// of the block SEED_DELAY_BLOCKS after this one seeds the audit: unknown to anyone when it is drawn.
    function drawAudit(uint256 taskId) external {
        if (arbitration.configOf(taskId).auditRateBps == 0) revert AuditsDisabled();
        ITaskRegistry.Task memory task = taskRegistry.getTask(taskId);
        if (task.status == ITaskRegistry.TaskStatus.None) revert ITaskRegistry.UnknownTask(taskId);
        if (task.status != ITaskRegistry.TaskStatus.ResultsCommitted) {
            revert ITaskRegistry.WrongStatus(taskId, task.status, ITaskRegistry.TaskStatus.ResultsCommitted);
        }
        uint256 endsAt = taskRegistry.challengeEndsAt(taskId);
        if (block.timestamp >= endsAt) revert ITaskRegistry.ChallengeWindowClosed(taskId, endsAt);
        Audit storage audit = _audits[taskId];
        if (audit.seedBlock != 0) revert AuditAlreadyDrawn(taskId, audit.seedBlock);
        audit.seedBlock = (block.number + SEED_DELAY_BLOCKS).toUint64();
        emit AuditDrawn(taskId, audit.seedBlock, false);
    }

    /// @inheritdoc IAudits
    /// @dev Anyone, once the seed block's random value is proven: `seed = keccak256(abi.encode(value, taskId))`;
    /// selected iff forced or `uint256(seed) % 10_000 < auditRateBps`; the line is
    /// `uint256(keccak256(abi.encode(seed, uint256(1)))) % requestCount`.
    function sealAudit(uint256 taskId) external returns (bool selected) {
        Audit storage audit = _audits[taskId];
        uint256 seedBlock = audit.seedBlock;
        if (seedBlock == 0) revert AuditNotDrawn(taskId);
        if (audit.isSealed) revert AuditAlreadySealed(taskId);
        bytes32 value = randomness.valueOf(seedBlock);
        if (value == 0) {
            if (!randomness.isExpired(seedBlock)) revert AuditSeedNotReady(taskId, seedBlock + 1);
            audit.seedBlock = (block.number + SEED_DELAY_BLOCKS).toUint64();
            audit.forced = true;
            emit AuditDrawn(taskId, audit.seedBlock, true);
            return false;
        }
        bytes32 seed = keccak256(abi.encode(value, taskId));
        selected = audit.forced || uint256(seed) % BPS < arbitration.configOf(taskId).auditRateBps;
        audit.isSealed = true;
        audit.seed = seed;
        audit.selected = selected;
        if (selected) {
            uint256 requestCount = taskRegistry.getTask(taskId).requestCount;
            audit.requestIndex = (uint256(keccak256(abi.encode(seed, uint256(1)))) % requestCount).toUint32();
        }
        emit AuditSealed(taskId, seed, selected, audit.requestIndex);
    }

    /// @inheritdoc IAudits
    /// @dev Arbitration checks that the opener is an active verifier and not a party, proves the leaf and names
    /// the miners held to account; others who can prove more accountable miners join its dispute there. The
    /// opener's seat is locked after: a verifier without one free is refused.
    function openAudit(
        uint256 taskId,
        ResultLeaf.Leaf calldata leaf,
        bytes32[] calldata proof,
        bytes32[][] calldata servedProofs
    ) external returns (uint256 disputeId) {
        Audit storage audit = _audits[taskId];
        if (!audit.isSealed) revert AuditNotSealed(taskId);
        if (!audit.selected) revert TaskNotSelected(taskId);
        if (leaf.requestIndex != audit.requestIndex) {
            revert NotAuditedLine(taskId, leaf.requestIndex, audit.requestIndex);
        }
        uint256 previous = audit.disputeId;
        if (previous != 0) {
            // Only an audit its opener abandoned (its jury never seated) is opened again, by anyone.
            if (!_abandoned(previous)) revert AuditAlreadyOpened(taskId, previous);
            if (!audit.settled) _settle(taskId, audit);
            audit.settled = false;
        }
        // Marked opened before the calls out (they go only to the protocol's own contracts).
        audit.disputeId = type(uint256).max;
        disputeId = arbitration.openAudit(taskId, msg.sender, leaf, proof, servedProofs);
        uint128 deposit = verifiers.minStake().toUint128();
        if (!verifiers.lockSeat(msg.sender, deposit)) revert AuditorStakeBusy(msg.sender, deposit);
        (audit.disputeId, audit.opener, audit.deposit) = (disputeId, msg.sender, deposit);
        emit AuditOpened(disputeId, taskId, msg.sender, deposit);
    }

    /// @inheritdoc IAudits
    function settleAudit(uint256 taskId) external returns (uint256 penalty) {
        Audit storage audit = _audits[taskId];
        if (audit.disputeId == 0) revert AuditNotOpened(taskId);
        if (audit.settled) revert AuditAlreadySettled(taskId);
        return _settle(taskId, audit);
    }

    /// @inheritdoc IAudits
    function auditOf(uint256 taskId) external view returns (Audit memory) {
        return _audits[taskId];
    }

    /// @dev Frees the opener's seat once the audit's dispute is resolved, taking its juror penalty for the
    /// audit pool when the miners were found correct or the jury was never drawn. The pool, not the line's
    /// miners: they may be the opener's own, who would get it back.
    function _settle(uint256 taskId, Audit storage audit) private returns (uint256 penalty) {
        uint256 disputeId = audit.disputeId;
        IArbitration.Dispute memory dispute = arbitration.getDispute(disputeId);
        if (dispute.status == IArbitration.DisputeStatus.Open) revert AuditStillOpen(taskId, disputeId);
        audit.settled = true;
        if (dispute.status == IArbitration.DisputeStatus.MinersCorrect || _abandoned(disputeId)) {
            penalty = uint256(audit.deposit) * dispute.terms.penaltyBps / BPS;
        }
        penalty = verifiers.releaseDeposit(audit.opener, audit.deposit, penalty);
        emit AuditSettled(taskId, audit.opener, penalty);
        if (penalty == 0) return 0;
        // The penalty reached the escrow as a transfer: owed from now on, all of it to the audit pool.
        escrow.absorbReceived();
        escrow.distribute(new address[](0), new uint256[](0));
    }

    /// @dev The dispute ended without a jury: round 0 seated nobody, because it was never drawn (anyone may
    /// draw; its opener did not) or because no weight of the pool was anyone's but a party's (an audit no jury
    /// can judge costs its opener, as one it left undrawn does).
    function _abandoned(uint256 disputeId) private view returns (bool) {
        return arbitration.getDispute(disputeId).status == IArbitration.DisputeStatus.NoDecision
            && arbitration.roundOf(disputeId, 0).seatsDrawn == 0;
    }
}
