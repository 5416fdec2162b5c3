// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {SafeCast} from "@openzeppelin/contracts/utils/math/SafeCast.sol";
import {IArbitration} from "./interfaces/IArbitration.sol";
import {ITaskRegistry} from "./interfaces/ITaskRegistry.sol";
import {IGPURegistry} from "./interfaces/IGPURegistry.sol";
import {IPaymentEscrow} from "./interfaces/IPaymentEscrow.sol";
import {IVerifierRegistry} from "./interfaces/IVerifierRegistry.sol";
import {IRandomness} from "./interfaces/IRandomness.sol";
import {AddressList} from "./libraries/AddressList.sol";
import {PayoutLedger} from "./libraries/PayoutLedger.sol";
import {ResultLeaf} from "./libraries/ResultLeaf.sol";
import {ArbitrationBase} from "./arbitration/ArbitrationBase.sol";
import {Juries} from "./arbitration/Juries.sol";

/// @title Arbitration
/// @notice Disputes over single result leaves, decided by juries (`Juries`), opened by task owners or, for a
/// random audit, by the audits contract on a verifier's behalf, under the configuration of `ArbitrationBase`.
///
/// Opening: the task owner challenges one leaf of a committed task inside its challenge window (one dispute per
/// task for the owner), posting a bond and the leaf's proofs; or an active verifier opens the random audit of a
/// selected task's selected line through the audits contract (bond from the audit pool). The task registry proves
/// the leaf at its position and names the miners held to account for it: those of its pipeline whose own signed
/// served root holds it (the dispute's pipeline below). Whoever opens a dispute chooses which served proofs to
/// show, so anyone may add the other accountable miners while it is open (`joinDispute`).
///
/// Appeals: after a round's reveal phase, a party on its losing side (the challenger side: owner or opener; the
/// miner side: the dispute's pipeline) may appeal within the appeal phase for twice the previous bond, to a jury of
/// 2 * seats + 1. The last round's majority is the outcome (a tie or no reveal: NoDecision). A round whose jury
/// is never drawn in time, or an appeal round drawn short of its seats, leaves the previous round's outcome
/// standing (NoDecision for round 0): whoever asked for the round bears its failure, and anyone may draw, so no
/// one gains by waiting.
///
/// Resolution pays everyone at once: at fault, the pipeline is slashed, the owner refunded, the jurors rewarded
/// out of the slash (within the pool's daily budget) and its rest pooled for audits (no party is paid a slash:
/// one holding a miner's leaked signer key could sign a wrong line and cash the lock); bonds of the winning side
/// come back, bonds of the losing side are forfeited (a reward share to the coherent jurors, the rest to the
/// other side, or in an audit to the pool; an audit-pool bond's rest back to the pool); NoDecision keeps a fee from the owner's bond for the miners. Jurors who voted against the
/// outcome or did not reveal are penalized (`Juries`). What no one can be paid (dust, no coherent juror) goes to
/// the audit pool.
contract Arbitration is Juries {
    using SafeCast for uint256;
    using AddressList for address[];
    using PayoutLedger for PayoutLedger.Ledger;

    /// @notice Role of the audits contract: opens a dispute over a selected line, its bond from the audit pool.
    bytes32 public constant AUDITS_ROLE = keccak256("AUDITS_ROLE");

    /// @notice Juror rewards paid of the pool's money (audit-pool bonds, convictions' slashes) on each day
    /// (`block.timestamp / 1 days`).
    mapping(uint256 day => uint256) public auditRewardsPaid;
    /// @notice Number of disputes opened so far; ids start at 1.
    uint256 public disputeCount;
    /// @inheritdoc IArbitration
    mapping(uint256 taskId => uint256 disputeId) public disputeOfTask;
    mapping(uint256 disputeId => Dispute) private _disputes;
    mapping(uint256 disputeId => address[]) private _pipelines;

    constructor(
        ITaskRegistry taskRegistry_,
        IGPURegistry gpuRegistry_,
        IPaymentEscrow escrow_,
        IVerifierRegistry verifiers_,
        IRandomness randomness_,
        address admin,
        Config memory initialConfig
    ) ArbitrationBase(taskRegistry_, gpuRegistry_, escrow_, verifiers_, randomness_, admin, initialConfig) {}

    /// @inheritdoc IArbitration
    /// @dev The owner must have approved the escrow for `disputeBond`. Inside the task's challenge window, or at
    /// any time while an audit of the task runs.
    function openDispute(
        uint256 taskId,
        ResultLeaf.Leaf calldata leaf,
        bytes32[] calldata proof,
        bytes32[][] calldata servedProofs
    ) external returns (uint256 disputeId) {
        ITaskRegistry.Task memory task = taskRegistry.getTask(taskId);
        if (task.owner != msg.sender) revert NotTaskOwner(taskId, msg.sender);
        uint256 existing = disputeOfTask[taskId];
        if (existing != 0) revert DisputeAlreadyOpen(taskId, existing);
        // Recorded before the calls out, so no callee could see the slot free.
        disputeOfTask[taskId] = disputeCount + 1;
        disputeId = _startDispute(taskId, task, msg.sender, leaf, proof, servedProofs);
    }

    /// @inheritdoc IArbitration
    /// @dev The audits contract has checked that the task was selected and that this is its line; the auditor is
    /// never drawn onto the audit's jury.
    function openAudit(
        uint256 taskId,
        address opener,
        ResultLeaf.Leaf calldata leaf,
        bytes32[] calldata proof,
        bytes32[][] calldata servedProofs
    ) external onlyRole(AUDITS_ROLE) returns (uint256 disputeId) {
        ITaskRegistry.Task memory task = taskRegistry.getTask(taskId);
        if (!verifiers.judges(opener, task.modelId)) revert NotVerifierOfModel(opener, task.modelId);
        if (_taskParties(taskId, task.owner, 0).contains(opener)) revert AuditorIsAParty(taskId, opener);
        disputeId = _startDispute(taskId, task, opener, leaf, proof, servedProofs);
    }

    /// @inheritdoc IArbitration
    /// @dev Any time while the dispute is open: the miners it adds are the task's own (already parties), so
    /// joining never changes who may sit on the jury.
    function joinDispute(
        uint256 disputeId,
        ResultLeaf.Leaf calldata leaf,
        bytes32[] calldata proof,
        bytes32[][] calldata servedProofs
    ) external {
        Dispute storage dispute = _open(disputeId);
        (bytes32 leafHash, address[] memory accountable) =
            taskRegistry.accountableFor(dispute.taskId, leaf, proof, servedProofs);
        if (leafHash != dispute.leafHash) revert NotDisputedLeaf(disputeId, leafHash);
        _join(disputeId, accountable);
    }

    /// @inheritdoc IArbitration
    /// @dev The appellant must have approved the escrow for twice the current round's bond.
    function appeal(uint256 disputeId) external {
        Dispute storage dispute = _open(disputeId);
        uint8 r = dispute.round;
        Round storage round = _rounds[disputeId][r];
        if (
            round.commitDeadline == 0 || block.timestamp < round.revealDeadline
                || block.timestamp >= round.appealDeadline || r + 1 >= MAX_ROUNDS
        ) revert NotAppealable(disputeId, r);
        bool challengerSide = msg.sender == dispute.challenger || msg.sender == dispute.opener;
        if (!challengerSide && !_pipelines[disputeId].contains(msg.sender)) {
            revert NotAParty(disputeId, msg.sender);
        }
        DisputeStatus outcome = _outcome(round);
        if (
            (outcome == DisputeStatus.MinersAtFault && challengerSide)
                || (outcome == DisputeStatus.MinersCorrect && !challengerSide)
        ) revert AppealByWinner(disputeId, msg.sender);

        uint8 next = r + 1;
        uint128 bond = round.bond * 2;
        dispute.round = next;
        uint64 seedBlock = _openRound(disputeId, dispute, next, bond, msg.sender, challengerSide);
        escrow.depositBond(_bondId(disputeId, next), msg.sender, bond);
        emit Appealed(disputeId, next, msg.sender, bond, seedBlock);
    }

    /// @inheritdoc IArbitration
    /// @dev After the last round's reveal phase (and its appeal phase, unless no appeal can follow), or once a
    /// round's jury can no longer be drawn.
    function resolve(uint256 disputeId) external returns (DisputeStatus outcome) {
        Dispute storage dispute = _open(disputeId);
        uint8 r = dispute.round;
        Round storage round = _rounds[disputeId][r];
        if (round.commitDeadline == 0) {
            if (!_drawExpired(round)) revert NotResolvable(disputeId, round.drawDeadline);
            outcome = r == 0 ? DisputeStatus.NoDecision : _outcome(_rounds[disputeId][r - 1]);
        } else {
            uint256 until = r + 1 < MAX_ROUNDS ? round.appealDeadline : round.revealDeadline;
            if (block.timestamp < until) revert NotResolvable(disputeId, until);
            outcome = _outcome(round);
        }
        dispute.status = outcome;
        _settle(disputeId, dispute, outcome);
    }

    /// @inheritdoc IArbitration
    function getDispute(uint256 disputeId) external view returns (Dispute memory) {
        return _disputes[disputeId];
    }

    /// @inheritdoc IArbitration
    function pipelineOf(uint256 disputeId) external view returns (address[] memory) {
        return _pipelines[disputeId];
    }

    /// @dev What owner disputes and audits share: the registry proves the leaf at its position in the committed
    /// results and names the miners accountable for it (those whose own served root holds it: the dispute's
    /// pipeline); the task frozen (the registry checks status and window); round 0 opened and its bond posted.
    function _startDispute(
        uint256 taskId,
        ITaskRegistry.Task memory task,
        address opener,
        ResultLeaf.Leaf calldata leaf,
        bytes32[] calldata proof,
        bytes32[][] calldata servedProofs
    ) private returns (uint256 disputeId) {
        (bytes32 leafHash, address[] memory accountable) =
            taskRegistry.accountableFor(taskId, leaf, proof, servedProofs);

        disputeId = ++disputeCount;
        // The owner opens its own disputes; an audit's opener is a verifier, never a party such as the owner.
        bool audit = opener != task.owner;
        Dispute storage dispute = _record(disputeId, task, opener, leaf, leafHash, audit);
        _pipelines[disputeId] = accountable;
        taskRegistry.markDisputed(taskId);
        address payer = audit ? address(0) : task.owner;
        uint64 seedBlock = _openRound(disputeId, dispute, 0, dispute.bond, payer, true);
        if (audit) escrow.depositBondFromAuditPool(_bondId(disputeId, 0), dispute.bond);
        else escrow.depositBond(_bondId(disputeId, 0), payer, dispute.bond);
        emit DisputeOpened(
            disputeId, taskId, task.owner, leaf.requestIndex, leafHash, dispute.bond, seedBlock
        );
    }

    function _open(uint256 disputeId) internal view override returns (Dispute storage dispute) {
        dispute = _disputes[disputeId];
        if (dispute.status == DisputeStatus.None) revert UnknownDispute(disputeId);
        if (dispute.status != DisputeStatus.Open) revert DisputeNotOpen(disputeId);
    }

    /// @dev The task's parties, the opener and the leaf's pipeline.
    function _parties(uint256 disputeId, Dispute storage dispute)
        internal
        view
        override
        returns (address[] memory parties)
    {
        address[] storage pipeline = _pipelines[disputeId];
        parties = _taskParties(dispute.taskId, dispute.challenger, 1 + pipeline.length);
        uint256 next = parties.length - 1 - pipeline.length;
        parties[next++] = dispute.opener;
        for (uint256 i = 0; i < pipeline.length; ++i) {
            parties[next++] = pipeline[i];
        }
    }

    /// @dev Writes a new dispute with the terms and bond of the configuration in force now.
    function _record(
        uint256 disputeId,
        ITaskRegistry.Task memory task,
        address opener,
        ResultLeaf.Leaf calldata leaf,
        bytes32 leafHash,
        bool audit
    ) private returns (Dispute storage dispute) {
        Config storage c = _configFor(leaf.taskId);
        dispute = _disputes[disputeId];
        dispute.taskId = leaf.taskId;
        dispute.challenger = task.owner;
        dispute.opener = opener;
        dispute.status = DisputeStatus.Open;
        dispute.audit = audit;
        dispute.requestIndex = leaf.requestIndex;
        dispute.openedAtBlock = block.number.toUint64();
        dispute.openedAt = block.timestamp.toUint64();
        dispute.bond = c.disputeBond.toUint128();
        dispute.leafHash = leafHash;
        dispute.modelId = task.modelId;
        dispute.terms = Terms({
            phase: c.votingPeriod.toUint32(),
            rewardBps: uint16(c.verifierRewardBps),
            penaltyBps: uint16(c.jurorPenaltyBps),
            noDecisionFeeBps: uint16(c.noDecisionFeeBps),
            baseJury: uint16(c.baseJury),
            seatStake: verifiers.minStakeAt(taskRegistry.termsOf(leaf.taskId).createdAt).toUint128()
        });
    }

    /// @dev Settles the task, then every bond, stake penalty and reward of the dispute in one escrow call.
    function _settle(uint256 disputeId, Dispute storage dispute, DisputeStatus outcome) private {
        uint256 taskId = dispute.taskId;
        bool atFault = outcome == DisputeStatus.MinersAtFault;
        address[] storage pipeline = _pipelines[disputeId];
        // An audit found nothing: the owner keeps the time it ran to dispute in.
        if (dispute.audit && !atFault) {
            taskRegistry.extendChallenge(taskId, block.timestamp - dispute.openedAt);
        }
        uint256 slashed = taskRegistry.resolveDispute(taskId, atFault, pipeline, disputeOfTask[taskId] != 0);

        uint256 rounds = dispute.round + 1;
        // Room for every payee: the challenger, each round's bond payer, the pipeline (twice: a NoDecision fee
        // and a forfeited bond cannot both happen, but appeals can forfeit once per round), and every juror.
        PayoutLedger.Ledger memory ledger =
            PayoutLedger.create(1 + rounds * (1 + pipeline.length) + _jurorCount(disputeId, rounds));
        _settleJurors(disputeId, dispute, rounds, outcome, ledger);
        escrow.absorbReceived();
        // At fault, the jurors' reward comes out of the slash within the pool's daily budget (a thief of a
        // miner's signer key can sit its own sybil on the jury of a line it signed); the rest stays in the
        // float, for the audit pool.
        if (atFault) ledger.jurorPot += _takeAuditBudget(slashed * dispute.terms.rewardBps / BPS);
        for (uint256 i = 0; i < rounds; ++i) {
            _settleBond(disputeId, dispute, uint8(i), outcome, pipeline, ledger);
        }
        uint256 rewards = _payJurors(disputeId, rounds, outcome, ledger);
        ledger.trim();
        escrow.distribute(ledger.payees, ledger.amounts);
        emit DisputeResolved(disputeId, outcome, slashed, rewards, ledger.penalties);
    }

    /// @dev Round `r`'s bond: back to its payer if its side won; kept in part (NoDecision fee on the owner's
    /// round-0 bond, unless round 0 was drawn and no seat could be) or forfeited otherwise. An audit-pool bond's
    /// unpaid rest stays in the float, which returns to the pool (so does an auditor's lost appeal bond); the
    /// pool's juror reward is capped per day.
    function _settleBond(
        uint256 disputeId,
        Dispute storage dispute,
        uint8 r,
        DisputeStatus outcome,
        address[] storage pipeline,
        PayoutLedger.Ledger memory ledger
    ) private {
        Round storage round = _rounds[disputeId][r];
        uint256 bond = escrow.releaseBond(_bondId(disputeId, r));
        address payer = round.bondPayer;
        if (outcome == DisputeStatus.NoDecision) {
            // The fee charges an owner for a dispute left undecided, not for a pool with no seat to draw.
            bool seatedNobody = round.commitDeadline != 0 && round.seatsDrawn == 0;
            uint256 fee = payer != address(0) && r == 0 && !seatedNobody
                ? bond * dispute.terms.noDecisionFeeBps / BPS
                : 0;
            _payPipeline(ledger, pipeline, fee, dispute.taskId);
            if (payer != address(0)) ledger.pay(payer, bond - fee);
            return;
        }
        bool won = round.challengerSide == (outcome == DisputeStatus.MinersAtFault);
        if (won) {
            if (payer != address(0)) ledger.pay(payer, bond);
            return;
        }
        uint256 reward = bond * dispute.terms.rewardBps / BPS;
        if (payer == address(0)) {
            reward = _takeAuditBudget(reward);
        } else if (round.challengerSide) {
            // An auditor's lost appeal: the rest stays in the float for the audit pool, not with the line's
            // miners, who may be the auditor's own.
            if (!dispute.audit) _payPipeline(ledger, pipeline, bond - reward, dispute.taskId);
        } else if (!dispute.audit) {
            // A miner's lost appeal: the rest to the owner, who defended the verdict; in an audit, which the
            // owner neither opened nor paid for, to the pool (the owner may be the miner's own).
            ledger.pay(dispute.challenger, bond - reward);
        }
        ledger.jurorPot += reward;
    }

    /// @dev Equal parts to the pipeline's miners, dust to the first; a zero address in the pipeline (the miners
    /// signed whatever the coordinator built) is paid to the coordinator's fee recipient, and so is everything
    /// when the pipeline is empty.
    function _payPipeline(
        PayoutLedger.Ledger memory ledger,
        address[] storage pipeline,
        uint256 amount,
        uint256 taskId
    ) private view {
        uint256 miners = pipeline.length;
        address feeRecipient = taskRegistry.termsOf(taskId).feeRecipient;
        if (miners == 0) {
            ledger.pay(feeRecipient, amount);
            return;
        }
        uint256 share = amount / miners;
        for (uint256 i = 0; i < miners; ++i) {
            uint256 part = i == 0 ? amount - share * (miners - 1) : share;
            address miner = pipeline[i];
            ledger.pay(miner == address(0) ? feeRecipient : miner, part);
        }
    }

    /// @dev Adds to the dispute's pipeline each of `accountable` not in it yet. `accountable` names each miner
    /// once, so the pipeline as it was is all there is to check against.
    function _join(uint256 disputeId, address[] memory accountable) private {
        address[] storage pipeline = _pipelines[disputeId];
        address[] memory before = pipeline;
        for (uint256 i = 0; i < accountable.length; ++i) {
            if (before.contains(accountable[i])) continue;
            pipeline.push(accountable[i]);
            emit MinerJoined(disputeId, accountable[i], msg.sender);
        }
    }

    /// @dev What is left of today's audit reward budget, up to `wanted`; records it as spent.
    function _takeAuditBudget(uint256 wanted) private returns (uint256 granted) {
        uint256 day = block.timestamp / 1 days;
        uint256 spent = auditRewardsPaid[day];
        uint256 cap = config().auditRewardPerDay;
        granted = spent >= cap ? 0 : (cap - spent < wanted ? cap - spent : wanted);
        auditRewardsPaid[day] = spent + granted;
    }

    /// @dev Bond ids in the escrow: one per dispute round.
    function _bondId(uint256 disputeId, uint8 r) private pure returns (uint256) {
        return disputeId << 8 | r;
    }
}
