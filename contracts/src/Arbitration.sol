// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {AccessControl} from "@openzeppelin/contracts/access/AccessControl.sol";
import {SafeCast} from "@openzeppelin/contracts/utils/math/SafeCast.sol";
import {IArbitration} from "./interfaces/IArbitration.sol";
import {ITaskRegistry} from "./interfaces/ITaskRegistry.sol";
import {IGPURegistry} from "./interfaces/IGPURegistry.sol";
import {IPaymentEscrow} from "./interfaces/IPaymentEscrow.sol";
import {ResultLeaf} from "./libraries/ResultLeaf.sol";
import {IVerifierRegistry} from "./interfaces/IVerifierRegistry.sol";

/// @title Arbitration
/// @notice Juries drawn at random, weighted by stake, decide disputes over single result leaves.
///
/// Opening: the task owner challenges one leaf of a committed task inside its challenge window (one dispute per
/// task for the owner), posting a bond and the leaf's proofs; or an active verifier opens the random audit of a
/// selected task's selected line (bond from the audit pool). The task registry proves the leaf at its position
/// and names the miners held to account for it: those of its pipeline whose own signed served root holds it
/// (the dispute's pipeline below). Audits never use or block the owner's dispute:
/// the owner may dispute while an audit runs, and the owner's window is extended by the time an audit ran.
///
/// Each round: the hash of the block after the opening (unknown when the round opens) seeds the draw, and the
/// candidates are the verifiers registered before the round opened. Anyone draws the jury once that block
/// exists: `seats` seats, each landing on a verifier with probability proportional to its registered stake.
/// A landing on a party to the dispute (task owner, opener, coordinator, the task's miners and their signers),
/// on an exiting verifier or on one without free stake for another seat is drawn again,
/// a bounded number of times. Each seat locks `seatStake` of the juror's stake. Jurors commit
/// `voteCommitment(...)`, then reveal; a side wins a round with more revealed seats.
///
/// Appeals: after a round's reveal phase, a party on its losing side (the challenger side: owner or opener; the
/// miner side: the dispute's pipeline) may appeal within the appeal phase for twice the previous bond, to a jury of
/// 2 * seats + 1. The last round's majority is the outcome (a tie or no reveal: NoDecision). A round whose jury
/// is never drawn in time leaves the previous round's outcome standing (NoDecision for round 0): whoever asked
/// for the round bears its failure, and anyone may draw, so no one gains by waiting.
///
/// Resolution pays everyone at once: at fault, the pipeline is slashed, the owner refunded and paid the slash
/// less the jurors' reward; bonds of the winning side come back, bonds of the losing side are forfeited (a
/// reward share to the coherent jurors, the rest to the other side; an audit-pool bond's rest back to the pool);
/// NoDecision keeps a fee from the owner's bond for the miners. Jurors of every round who voted against the
/// outcome or did not reveal lose `penaltyBps` of their seats' stake, which goes, with the reward, to the
/// coherent seats. What no one can be paid (dust, no coherent juror) goes to the audit pool.
contract Arbitration is IArbitration, AccessControl {
    using SafeCast for uint256;

    uint256 public constant MAX_ROUNDS = 3;
    uint256 public constant MAX_REWARD_BPS = 5_000;
    uint256 public constant MAX_NO_DECISION_FEE_BPS = 5_000;
    uint256 public constant MAX_BASE_JURY = 15;
    uint256 public constant MIN_PHASE = 1 minutes;
    uint256 public constant MAX_AUDIT_RATE_BPS = 10_000;
    /// @notice Draws per seat before a jury is left short (parties and busy verifiers are drawn again).
    uint256 public constant DRAW_ATTEMPTS_PER_SEAT = 4;
    /// @notice Blocks whose hash the EVM still returns: a seed must be used within them.
    uint256 public constant BLOCKHASH_WINDOW = 256;
    uint256 private constant BPS = 10_000;

    ITaskRegistry public immutable taskRegistry;
    IGPURegistry public immutable gpuRegistry;
    IPaymentEscrow public immutable escrow;
    /// @notice The verifiers' stake and their weight in jury draws.
    IVerifierRegistry public immutable verifiers;

    /// @dev Every configuration ever set, and the time from which each applies to newly created tasks.
    Config[] private _configs;
    uint64[] private _configSince;
    /// @notice Number of disputes opened so far; ids start at 1.
    uint256 public disputeCount;
    /// @notice Juror rewards the audit pool has paid on each day (`block.timestamp / 1 days`).
    mapping(uint256 day => uint256) public auditRewardsPaid;

    mapping(uint256 disputeId => Dispute) private _disputes;
    mapping(uint256 disputeId => address[]) private _pipelines;
    mapping(uint256 disputeId => Round[]) private _rounds;
    mapping(uint256 disputeId => mapping(uint8 round => address[])) private _jurors;
    mapping(uint256 disputeId => mapping(uint8 round => mapping(address => Juror))) private _seats;
    /// @inheritdoc IArbitration
    mapping(uint256 taskId => uint256 disputeId) public disputeOfTask;
    mapping(uint256 taskId => Audit) private _audits;

    /// @dev What a resolution pays, built in memory and handed to the escrow in one call.
    struct Ledger {
        address[] payees;
        uint256[] amounts;
        uint256 count;
        uint256 jurorPot;
        uint256 penalties;
        uint256 coherentSeats;
    }

    constructor(
        ITaskRegistry taskRegistry_,
        IGPURegistry gpuRegistry_,
        IPaymentEscrow escrow_,
        IVerifierRegistry verifiers_,
        address admin,
        Config memory initialConfig
    ) {
        if (
            address(taskRegistry_) == address(0) || address(gpuRegistry_) == address(0)
                || address(escrow_) == address(0) || address(verifiers_) == address(0) || admin == address(0)
        ) revert ZeroAddress();
        taskRegistry = taskRegistry_;
        gpuRegistry = gpuRegistry_;
        escrow = escrow_;
        verifiers = verifiers_;
        _grantRole(DEFAULT_ADMIN_ROLE, admin);
        _setConfig(initialConfig);
    }

    // ---------------------------------------------------------------------------------------------- disputes

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
        disputeId = _startDispute(taskId, task, leaf, proof, servedProofs, false);
    }

    /// @inheritdoc IArbitration
    function drawJury(uint256 disputeId) external {
        Dispute storage dispute = _open(disputeId);
        uint8 r = dispute.round;
        Round storage round = _rounds[disputeId][r];
        if (round.commitDeadline != 0) revert JuryAlreadyDrawn(disputeId, r);
        if (block.number <= round.seedBlock) revert JuryNotDrawable(disputeId, round.seedBlock + 1);
        if (_drawExpired(round)) revert DrawExpired(disputeId, r);
        uint256 seed = uint256(keccak256(abi.encode(blockhash(round.seedBlock), disputeId, r)));
        uint256 drawn =
            _drawSeats(disputeId, r, seed, round, _parties(disputeId, dispute), dispute.terms.seatStake);
        uint64 phase = dispute.terms.phase;
        round.seatsDrawn = uint16(drawn);
        round.commitDeadline = (block.timestamp + phase).toUint64();
        round.revealDeadline = round.commitDeadline + phase;
        round.appealDeadline = round.revealDeadline + phase;
        emit JuryDrawn(disputeId, r, uint16(drawn), round.commitDeadline);
    }

    /// @inheritdoc IArbitration
    function commitVote(uint256 disputeId, bytes32 commitment) external {
        Dispute storage dispute = _open(disputeId);
        uint8 r = dispute.round;
        Round storage round = _rounds[disputeId][r];
        if (round.commitDeadline == 0 || block.timestamp >= round.commitDeadline) {
            revert NotCommitPhase(disputeId, r);
        }
        Juror storage juror = _juror(disputeId, r, msg.sender);
        if (juror.commitment != 0) revert AlreadyCommitted(disputeId, msg.sender);
        if (commitment == 0) revert InvalidVote();
        juror.commitment = commitment;
        emit VoteCommitted(disputeId, r, msg.sender);
    }

    /// @inheritdoc IArbitration
    /// @dev Only after the commit phase, so no revealed vote can be copied by a juror still to commit.
    function revealVote(uint256 disputeId, Vote choice, bytes32 salt) external {
        Dispute storage dispute = _open(disputeId);
        uint8 r = dispute.round;
        Round storage round = _rounds[disputeId][r];
        if (
            round.commitDeadline == 0 || block.timestamp < round.commitDeadline
                || block.timestamp >= round.revealDeadline
        ) {
            revert NotRevealPhase(disputeId, r);
        }
        Juror storage juror = _juror(disputeId, r, msg.sender);
        if (juror.vote != Vote.None) revert AlreadyRevealed(disputeId, msg.sender);
        if (choice == Vote.None) revert InvalidVote();
        if (voteCommitment(disputeId, r, msg.sender, choice, salt) != juror.commitment) {
            revert CommitmentMismatch(disputeId, msg.sender);
        }
        juror.vote = choice;
        if (choice == Vote.MinersAtFault) round.votesAtFault += juror.seats;
        else round.votesCorrect += juror.seats;
        emit VoteRevealed(disputeId, r, msg.sender, choice, juror.seats);
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
        if (!challengerSide && !_contains(_pipelines[disputeId], msg.sender)) {
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
        uint64 seedBlock = _openRound(disputeId, dispute.terms, next, bond, msg.sender, challengerSide);
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

    // ---------------------------------------------------------------------------------------------- audits

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
        if (_contains(_taskParties(taskId, task.owner, 0), msg.sender)) {
            revert AuditorIsAParty(taskId, msg.sender);
        }
        audit.disputeId = disputeCount + 1;
        disputeId = _startDispute(taskId, task, leaf, proof, servedProofs, true);
        emit AuditOpened(disputeId, taskId, msg.sender);
    }

    // ------------------------------------------------------------------------------------------------ admin

    /// @notice Sets the configuration for tasks created from the next second on; every existing task keeps the
    /// one it was created under (and every open dispute the terms it opened with).
    function setConfig(Config calldata newConfig) external onlyRole(DEFAULT_ADMIN_ROLE) {
        _setConfig(newConfig);
    }

    // ------------------------------------------------------------------------------------------------ views

    /// @notice The configuration for tasks created from now on.
    function config() public view returns (Config memory) {
        return _configs[_configs.length - 1];
    }

    /// @notice The configuration a task lives under: the one in force when it was created.
    function configOf(uint256 taskId) external view returns (Config memory) {
        return _configFor(taskId);
    }

    /// @notice The bond a task owner posts to open a dispute, under the current configuration.
    function disputeBond() external view returns (uint256) {
        return config().disputeBond;
    }

    /// @inheritdoc IArbitration
    function voteCommitment(uint256 disputeId, uint8 round, address juror, Vote choice, bytes32 salt)
        public
        pure
        returns (bytes32)
    {
        return keccak256(abi.encode(disputeId, round, juror, choice, salt));
    }

    /// @inheritdoc IArbitration
    function getDispute(uint256 disputeId) external view returns (Dispute memory) {
        return _disputes[disputeId];
    }

    /// @inheritdoc IArbitration
    function roundOf(uint256 disputeId, uint8 round) external view returns (Round memory) {
        return _rounds[disputeId][round];
    }

    /// @inheritdoc IArbitration
    function jurorsOf(uint256 disputeId, uint8 round) external view returns (address[] memory) {
        return _jurors[disputeId][round];
    }

    /// @inheritdoc IArbitration
    function jurorOf(uint256 disputeId, uint8 round, address account) external view returns (Juror memory) {
        return _seats[disputeId][round][account];
    }

    /// @inheritdoc IArbitration
    function pipelineOf(uint256 disputeId) external view returns (address[] memory) {
        return _pipelines[disputeId];
    }

    /// @inheritdoc IArbitration
    function auditOf(uint256 taskId) external view returns (Audit memory) {
        return _audits[taskId];
    }

    // --------------------------------------------------------------------------------------------- opening

    /// @dev What owner disputes and audits share: the registry proves the leaf at its position in the committed
    /// results and names the miners accountable for it (those whose own served root holds it: the dispute's
    /// pipeline); the task frozen (the registry checks status and window); round 0 opened and its bond posted.
    function _startDispute(
        uint256 taskId,
        ITaskRegistry.Task memory task,
        ResultLeaf.Leaf calldata leaf,
        bytes32[] calldata proof,
        bytes32[][] calldata servedProofs,
        bool audit
    ) private returns (uint256 disputeId) {
        (bytes32 leafHash, address[] memory accountable) =
            taskRegistry.accountableFor(taskId, leaf, proof, servedProofs);

        disputeId = ++disputeCount;
        Dispute storage dispute = _record(disputeId, task.owner, leaf, leafHash, audit);
        _pipelines[disputeId] = accountable;
        taskRegistry.markDisputed(taskId);
        address payer = audit ? address(0) : task.owner;
        uint64 seedBlock = _openRound(disputeId, dispute.terms, 0, dispute.bond, payer, true);
        if (audit) escrow.depositBondFromAuditPool(_bondId(disputeId, 0), dispute.bond);
        else escrow.depositBond(_bondId(disputeId, 0), payer, dispute.bond);
        emit DisputeOpened(
            disputeId, taskId, task.owner, leaf.requestIndex, leafHash, dispute.bond, seedBlock
        );
    }

    /// @dev Writes a new dispute with the terms and bond of the configuration in force now.
    function _record(
        uint256 disputeId,
        address owner,
        ResultLeaf.Leaf calldata leaf,
        bytes32 leafHash,
        bool audit
    ) private returns (Dispute storage dispute) {
        Config storage c = _configFor(leaf.taskId);
        dispute = _disputes[disputeId];
        dispute.taskId = leaf.taskId;
        dispute.challenger = owner;
        dispute.opener = msg.sender;
        dispute.status = DisputeStatus.Open;
        dispute.audit = audit;
        dispute.requestIndex = leaf.requestIndex;
        dispute.openedAtBlock = block.number.toUint64();
        dispute.openedAt = block.timestamp.toUint64();
        dispute.bond = c.disputeBond.toUint128();
        dispute.leafHash = leafHash;
        dispute.terms = Terms({
            phase: c.votingPeriod.toUint32(),
            rewardBps: uint16(c.verifierRewardBps),
            penaltyBps: uint16(c.jurorPenaltyBps),
            noDecisionFeeBps: uint16(c.noDecisionFeeBps),
            baseJury: uint16(c.baseJury),
            seatStake: verifiers.minStake().toUint128()
        });
    }

    /// @dev Round `r` has `2^r * (baseJury + 1) - 1` seats; its seed is the next block's hash, and only verifiers
    /// registered by now can sit on it.
    function _openRound(
        uint256 disputeId,
        Terms memory terms,
        uint8 r,
        uint128 bond,
        address bondPayer,
        bool challengerSide
    ) private returns (uint64 seedBlock) {
        seedBlock = (block.number + 1).toUint64();
        _rounds[disputeId].push(
            Round({
                seedBlock: seedBlock,
                drawDeadline: (block.timestamp + terms.phase).toUint64(),
                commitDeadline: 0,
                revealDeadline: 0,
                appealDeadline: 0,
                seats: uint16(((uint256(terms.baseJury) + 1) << r) - 1),
                seatsDrawn: 0,
                votesCorrect: 0,
                votesAtFault: 0,
                weightTotal: verifiers.totalWeight().toUint128(),
                bond: bond,
                bondPayer: bondPayer,
                challengerSide: challengerSide
            })
        );
    }

    /// @dev Fills up to `round.seats` seats from numbers derived from `seed`, skipping parties, exiting verifiers
    /// and verifiers without `seatStake` free; at most DRAW_ATTEMPTS_PER_SEAT draws per seat.
    function _drawSeats(
        uint256 disputeId,
        uint8 r,
        uint256 seed,
        Round storage round,
        address[] memory parties,
        uint256 seatStake
    ) private returns (uint256 drawn) {
        uint256 total = round.weightTotal;
        uint256 seats = round.seats;
        if (total == 0) return 0;
        uint256 attempts = seats * DRAW_ATTEMPTS_PER_SEAT;
        for (uint256 attempt = 0; drawn < seats && attempt < attempts; ++attempt) {
            address account =
                verifiers.candidate(uint256(keccak256(abi.encode(seed, attempt))) % total, total);
            if (_contains(parties, account) || !verifiers.lockSeat(account, seatStake)) continue;
            Juror storage juror = _seats[disputeId][r][account];
            if (juror.seats == 0) _jurors[disputeId][r].push(account);
            ++juror.seats;
            ++drawn;
        }
    }

    // ------------------------------------------------------------------------------------------ resolution

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
        Ledger memory ledger = _newLedger(disputeId, rounds, pipeline.length);
        _settleJurors(disputeId, dispute, rounds, outcome, ledger);
        escrow.absorbReceived();
        if (atFault) {
            uint256 reward = slashed * dispute.terms.rewardBps / BPS;
            ledger.jurorPot += reward;
            _pay(ledger, dispute.challenger, slashed - reward);
        }
        for (uint256 i = 0; i < rounds; ++i) {
            _settleBond(disputeId, dispute, uint8(i), outcome, pipeline, ledger);
        }
        uint256 rewards = _payJurors(disputeId, rounds, outcome, ledger);
        _trim(ledger);
        escrow.distribute(ledger.payees, ledger.amounts);
        emit DisputeResolved(disputeId, outcome, slashed, rewards, ledger.penalties);
    }

    /// @dev Unlocks every seat; an incoherent or silent seat loses `penaltyBps` of its stake (the verifier
    /// registry sends it to the escrow). Coherent: the outcome's vote, or any revealed vote when there was no decision.
    function _settleJurors(
        uint256 disputeId,
        Dispute storage dispute,
        uint256 rounds,
        DisputeStatus outcome,
        Ledger memory ledger
    ) private {
        uint256 seatStake = dispute.terms.seatStake;
        uint256 seatPenalty = seatStake * dispute.terms.penaltyBps / BPS;
        for (uint8 r = 0; r < rounds; ++r) {
            address[] storage jurors = _jurors[disputeId][r];
            for (uint256 i = 0; i < jurors.length; ++i) {
                Juror storage juror = _seats[disputeId][r][jurors[i]];
                uint256 penalty;
                if (_coherent(juror.vote, outcome)) {
                    ledger.coherentSeats += juror.seats;
                } else {
                    penalty = seatPenalty * juror.seats;
                    ledger.penalties += penalty;
                    emit JurorSettled(disputeId, jurors[i], penalty, 0);
                }
                verifiers.releaseSeat(jurors[i], seatStake * juror.seats, penalty);
            }
        }
        ledger.jurorPot += ledger.penalties;
    }

    /// @dev Round `r`'s bond: back to its payer if its side won; kept in part (NoDecision fee on the owner's
    /// round-0 bond) or forfeited otherwise. An audit-pool bond's unpaid rest stays in the float, which returns
    /// to the pool; its juror reward is capped per day.
    function _settleBond(
        uint256 disputeId,
        Dispute storage dispute,
        uint8 r,
        DisputeStatus outcome,
        address[] storage pipeline,
        Ledger memory ledger
    ) private {
        Round storage round = _rounds[disputeId][r];
        uint256 bond = escrow.releaseBond(_bondId(disputeId, r));
        address payer = round.bondPayer;
        if (outcome == DisputeStatus.NoDecision) {
            uint256 fee = payer != address(0) && r == 0 ? bond * dispute.terms.noDecisionFeeBps / BPS : 0;
            _payPipeline(ledger, pipeline, fee, dispute.taskId);
            if (payer != address(0)) _pay(ledger, payer, bond - fee);
            return;
        }
        bool won = round.challengerSide == (outcome == DisputeStatus.MinersAtFault);
        if (won) {
            if (payer != address(0)) _pay(ledger, payer, bond);
            return;
        }
        uint256 reward = bond * dispute.terms.rewardBps / BPS;
        if (payer == address(0)) {
            reward = _takeAuditBudget(reward);
        } else if (round.challengerSide) {
            _payPipeline(ledger, pipeline, bond - reward, dispute.taskId);
        } else {
            _pay(ledger, dispute.challenger, bond - reward);
        }
        ledger.jurorPot += reward;
    }

    /// @dev The juror pot shared by coherent seats; rounding dust (or the whole pot, with no coherent seat) stays
    /// in the float for the audit pool. Returns what the jurors got.
    function _payJurors(uint256 disputeId, uint256 rounds, DisputeStatus outcome, Ledger memory ledger)
        private
        returns (uint256 paid)
    {
        if (ledger.coherentSeats == 0) return 0;
        uint256 perSeat = ledger.jurorPot / ledger.coherentSeats;
        for (uint8 r = 0; r < rounds; ++r) {
            address[] storage jurors = _jurors[disputeId][r];
            for (uint256 i = 0; i < jurors.length; ++i) {
                Juror storage juror = _seats[disputeId][r][jurors[i]];
                if (!_coherent(juror.vote, outcome)) continue;
                uint256 reward = perSeat * juror.seats;
                _pay(ledger, jurors[i], reward);
                paid += reward;
                emit JurorSettled(disputeId, jurors[i], 0, reward);
            }
        }
    }

    /// @dev Arrays long enough for every payee: the challenger, each round's bond payer, the pipeline (twice:
    /// a NoDecision fee and a forfeited bond cannot both happen, but appeals can forfeit once per round), and
    /// every juror.
    function _newLedger(uint256 disputeId, uint256 rounds, uint256 pipelineLength)
        private
        view
        returns (Ledger memory ledger)
    {
        uint256 size = 1 + rounds * (1 + pipelineLength);
        for (uint8 r = 0; r < rounds; ++r) {
            size += _jurors[disputeId][r].length;
        }
        ledger.payees = new address[](size);
        ledger.amounts = new uint256[](size);
    }

    function _pay(Ledger memory ledger, address payee, uint256 amount) private pure {
        if (amount == 0) return;
        ledger.payees[ledger.count] = payee;
        ledger.amounts[ledger.count] = amount;
        ++ledger.count;
    }

    /// @dev Equal parts to the pipeline's miners, dust to the first; a zero address in the pipeline (the miners
    /// signed whatever the coordinator built) is paid to the coordinator's fee recipient, and so is everything
    /// when the pipeline is empty.
    function _payPipeline(Ledger memory ledger, address[] storage pipeline, uint256 amount, uint256 taskId)
        private
        view
    {
        uint256 miners = pipeline.length;
        address feeRecipient = taskRegistry.termsOf(taskId).feeRecipient;
        if (miners == 0) {
            _pay(ledger, feeRecipient, amount);
            return;
        }
        uint256 share = amount / miners;
        for (uint256 i = 0; i < miners; ++i) {
            uint256 part = i == 0 ? amount - share * (miners - 1) : share;
            address miner = pipeline[i];
            _pay(ledger, miner == address(0) ? feeRecipient : miner, part);
        }
    }

    /// @dev Shortens the ledger's arrays to the entries written.
    function _trim(Ledger memory ledger) private pure {
        address[] memory payees = ledger.payees;
        uint256[] memory amounts = ledger.amounts;
        uint256 count = ledger.count;
        assembly ("memory-safe") {
            mstore(payees, count)
            mstore(amounts, count)
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

    // --------------------------------------------------------------------------------------------- helpers

    function _open(uint256 disputeId) private view returns (Dispute storage dispute) {
        dispute = _disputes[disputeId];
        if (dispute.status == DisputeStatus.None) revert UnknownDispute(disputeId);
        if (dispute.status != DisputeStatus.Open) revert DisputeNotOpen(disputeId);
    }

    function _juror(uint256 disputeId, uint8 r, address account) private view returns (Juror storage juror) {
        juror = _seats[disputeId][r][account];
        if (juror.seats == 0) revert NotJuror(disputeId, r, account);
    }

    /// @dev A round's jury can no longer be drawn: its seed block's hash is gone, or its drawing phase is over.
    function _drawExpired(Round storage round) private view returns (bool) {
        return
            block.number > uint256(round.seedBlock) + BLOCKHASH_WINDOW
                || block.timestamp >= round.drawDeadline;
    }

    function _outcome(Round storage round) private view returns (DisputeStatus) {
        if (round.votesAtFault > round.votesCorrect) return DisputeStatus.MinersAtFault;
        if (round.votesCorrect > round.votesAtFault) return DisputeStatus.MinersCorrect;
        return DisputeStatus.NoDecision;
    }

    function _coherent(Vote vote, DisputeStatus outcome) private pure returns (bool) {
        if (outcome == DisputeStatus.NoDecision) return vote != Vote.None;
        return
            outcome == DisputeStatus.MinersAtFault ? vote == Vote.MinersAtFault : vote == Vote.MinersCorrect;
    }

    /// @dev Bond ids in the escrow: one per dispute round.
    function _bondId(uint256 disputeId, uint8 r) private pure returns (uint256) {
        return disputeId << 8 | r;
    }

    /// @dev Everyone who may not sit on this dispute's jury: the task's parties, the opener and the leaf's
    /// pipeline.
    function _parties(uint256 disputeId, Dispute storage dispute)
        private
        view
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

    /// @dev The task's owner, the coordinator that assigned it, every assigned miner and its signer, followed by
    /// `extra` empty slots for the caller to fill.
    function _taskParties(uint256 taskId, address owner, uint256 extra)
        private
        view
        returns (address[] memory parties)
    {
        address[] memory miners = taskRegistry.minersOf(taskId);
        parties = new address[](2 + 2 * miners.length + extra);
        parties[0] = owner;
        parties[1] = taskRegistry.coordinatorOf(taskId);
        for (uint256 i = 0; i < miners.length; ++i) {
            parties[2 + 2 * i] = miners[i];
            parties[3 + 2 * i] = gpuRegistry.signerOf(miners[i]);
        }
    }

    function _contains(address[] memory list, address item) private pure returns (bool) {
        for (uint256 i = 0; i < list.length; ++i) {
            if (list[i] == item) return true;
        }
        return false;
    }

    /// @dev Checks every bound, including that a miner's stake cannot finish unbonding while a dispute that could
    /// slash it may still open or run: the challenge window, plus an audit's longest run (which extends the
    /// owner's window), plus the owner's dispute's longest run.
    function _setConfig(Config memory c) private {
        if (c.disputeBond == 0) revert ZeroBond();
        if (c.votingPeriod < MIN_PHASE) revert PhaseTooShort(c.votingPeriod, MIN_PHASE);
        if (c.verifierRewardBps > MAX_REWARD_BPS) revert RewardTooHigh(c.verifierRewardBps, MAX_REWARD_BPS);
        if (c.jurorPenaltyBps == 0 || c.jurorPenaltyBps > BPS) revert PenaltyOutOfRange(c.jurorPenaltyBps);
        if (c.noDecisionFeeBps > MAX_NO_DECISION_FEE_BPS) {
            revert FeeTooHigh(c.noDecisionFeeBps, MAX_NO_DECISION_FEE_BPS);
        }
        // Odd, so that a fully revealed jury cannot tie; every later round stays odd.
        if (c.baseJury == 0 || c.baseJury > MAX_BASE_JURY || c.baseJury % 2 == 0) {
            revert JurySizeOutOfRange(c.baseJury);
        }
        if (c.auditRateBps > MAX_AUDIT_RATE_BPS) revert AuditRateTooHigh(c.auditRateBps, MAX_AUDIT_RATE_BPS);
        uint256 longest = MAX_ROUNDS * 4 * c.votingPeriod;
        uint256 exposure = taskRegistry.challengeWindow() + 2 * longest;
        uint256 unbonding = gpuRegistry.unbondingPeriod();
        if (unbonding <= exposure) revert UnbondingTooShort(unbonding, exposure);
        // From the next second on: a task created in this very block keeps the previous configuration.
        _configs.push(c);
        _configSince.push(_configs.length == 1 ? 0 : (block.timestamp + 1).toUint64());
        emit ConfigChanged(c);
    }

    /// @dev The latest configuration whose start is at or before the task's creation (binary search over the
    /// configurations set so far).
    function _configFor(uint256 taskId) private view returns (Config storage) {
        uint256 createdAt = taskRegistry.termsOf(taskId).createdAt;
        uint256 low = 0;
        uint256 high = _configs.length - 1;
        while (low < high) {
            uint256 mid = (low + high + 1) / 2;
            if (_configSince[mid] <= createdAt) low = mid;
            else high = mid - 1;
        }
        return _configs[low];
    }
}
