// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {SafeCast} from "@openzeppelin/contracts/utils/math/SafeCast.sol";
import {IArbitration} from "../interfaces/IArbitration.sol";
import {ITaskRegistry} from "../interfaces/ITaskRegistry.sol";
import {AddressList} from "../libraries/AddressList.sol";
import {ResultLeaf} from "../libraries/ResultLeaf.sol";
import {ArbitrationBase} from "./ArbitrationBase.sol";

/// @title Audits
/// @notice Random audits paid from the audit pool: anyone draws a committed task's audit inside its challenge
/// window, the next block's hash decides whether it is selected and which line, and an active verifier that is
/// not a party opens a dispute over that line with a bond from the pool. Audits never use or block the owner's
/// dispute: the owner may dispute while an audit runs, and its window is extended by the time an audit ran.
/// Juror rewards the pool pays are capped per day: whoever loses audits on purpose drains it no faster.
abstract contract Audits is ArbitrationBase {
    using SafeCast for uint256;
    using AddressList for address[];

    /// @notice Juror rewards the audit pool has paid on each day (`block.timestamp / 1 days`).
    mapping(uint256 day => uint256) public auditRewardsPaid;
    mapping(uint256 taskId => Audit) private _audits;

    /// @inheritdoc IArbitration
    /// @dev The caller must have approved the escrow for `amount`.
    function fundAuditPool(uint256 amount) external {
        escrow.fundAuditPool(msg.sender, amount);
    }

    /// @inheritdoc IArbitration
    /// @dev Anyone, once per task, while the task is committed and inside its challenge window. The hash of the
    /// block this transaction lands in seeds the audit: unknown to the caller when it sends it (only that block's
    /// proposer could withhold it, at its own cost). The draw is final: it is never drawn again.
    function drawAudit(uint256 taskId) external {
        if (_configFor(taskId).auditRateBps == 0) revert AuditsDisabled();
        ITaskRegistry.Task memory task = taskRegistry.getTask(taskId);
        if (task.status == ITaskRegistry.TaskStatus.None) revert ITaskRegistry.UnknownTask(taskId);
        if (task.status != ITaskRegistry.TaskStatus.ResultsCommitted) {
            revert ITaskRegistry.WrongStatus(taskId, task.status, ITaskRegistry.TaskStatus.ResultsCommitted);
        }
        uint256 endsAt = taskRegistry.challengeEndsAt(taskId);
        if (block.timestamp >= endsAt) revert ITaskRegistry.ChallengeWindowClosed(taskId, endsAt);
        Audit storage audit = _audits[taskId];
        if (audit.drawBlock != 0) revert AuditAlreadyDrawn(taskId, audit.drawBlock);
        audit.drawBlock = block.number.toUint64();
        emit AuditDrawn(taskId, block.number);
    }

    /// @inheritdoc IArbitration
    /// @dev Anyone, from the block after the draw: `seed = keccak256(abi.encode(blockhash(drawBlock), taskId))`;
    /// selected iff `uint256(seed) % 10_000 < auditRateBps`; the line is
    /// `uint256(keccak256(abi.encode(seed, uint256(1)))) % requestCount`. If the hash is no longer available
    /// (256 blocks passed), the draw seals as not selected: it fails closed, so withholding the seal can never
    /// buy a second draw.
    function sealAudit(uint256 taskId) external returns (bool selected) {
        Audit storage audit = _audits[taskId];
        uint256 drawn = audit.drawBlock;
        if (drawn == 0) revert AuditNotDrawn(taskId);
        if (audit.isSealed) revert AuditAlreadySealed(taskId);
        if (block.number <= drawn) revert AuditSeedNotReady(taskId, drawn + 1);
        bytes32 hash = blockhash(drawn);
        audit.isSealed = true;
        if (hash != 0) {
            bytes32 seed = keccak256(abi.encode(hash, taskId));
            selected = uint256(seed) % BPS < _configFor(taskId).auditRateBps;
            audit.seed = seed;
            audit.selected = selected;
            if (selected) {
                uint256 requestCount = taskRegistry.getTask(taskId).requestCount;
                audit.requestIndex =
                    (uint256(keccak256(abi.encode(seed, uint256(1)))) % requestCount).toUint32();
            }
        }
        emit AuditSealed(taskId, audit.seed, selected, audit.requestIndex);
    }

    /// @inheritdoc IArbitration
    /// @dev Only an active verifier that is not a party to the task, on the selected line of a selected task.
    /// The task owner is the challenger; the bond comes from the audit pool (`AuditPoolTooSmall` when it cannot
    /// cover it). The auditor is never drawn onto the audit's jury.
    function openAudit(
        uint256 taskId,
        ResultLeaf.Leaf calldata leaf,
        bytes32[] calldata proof,
        bytes32[][] calldata servedProofs
    ) external returns (uint256 disputeId) {
        if (!verifiers.isVerifier(msg.sender)) revert NotVerifier(msg.sender);
        Audit storage audit = _audits[taskId];
        if (!audit.isSealed) revert AuditNotSealed(taskId);
        if (!audit.selected) revert TaskNotSelected(taskId);
        if (audit.disputeId != 0) revert AuditAlreadyOpened(taskId, audit.disputeId);
        if (leaf.requestIndex != audit.requestIndex) {
            revert NotAuditedLine(taskId, leaf.requestIndex, audit.requestIndex);
        }
        ITaskRegistry.Task memory task = taskRegistry.getTask(taskId);
        if (_taskParties(taskId, task.owner, 0).contains(msg.sender)) {
            revert AuditorIsAParty(taskId, msg.sender);
        }
        // Recorded before the calls out, so no callee could see the audit unopened.
        audit.disputeId = _nextDisputeId();
        disputeId = _startDispute(taskId, task, leaf, proof, servedProofs, true);
        emit AuditOpened(disputeId, taskId, msg.sender);
    }

    /// @inheritdoc IArbitration
    function auditOf(uint256 taskId) external view returns (Audit memory) {
        return _audits[taskId];
    }

    /// @dev The id the next dispute will get.
    function _nextDisputeId() internal view virtual returns (uint256);

    /// @dev Opens a dispute over `leaf` (an audit when `audit`: its bond from the pool); returns its id.
    function _startDispute(
        uint256 taskId,
        ITaskRegistry.Task memory task,
        ResultLeaf.Leaf calldata leaf,
        bytes32[] calldata proof,
        bytes32[][] calldata servedProofs,
        bool audit
    ) internal virtual returns (uint256 disputeId);

    /// @dev What is left of today's audit reward budget, up to `wanted`; records it as spent.
    function _takeAuditBudget(uint256 wanted) internal returns (uint256 granted) {
        uint256 day = block.timestamp / 1 days;
        uint256 spent = auditRewardsPaid[day];
        uint256 cap = config().auditRewardPerDay;
        granted = spent >= cap ? 0 : (cap - spent < wanted ? cap - spent : wanted);
        auditRewardsPaid[day] = spent + granted;
    }
}
