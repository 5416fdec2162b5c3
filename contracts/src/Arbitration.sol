// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {AccessControl} from "@openzeppelin/contracts/access/AccessControl.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {MerkleProof} from "@openzeppelin/contracts/utils/cryptography/MerkleProof.sol";
import {SafeCast} from "@openzeppelin/contracts/utils/math/SafeCast.sol";
import {IArbitration} from "./interfaces/IArbitration.sol";
import {ITaskRegistry} from "./interfaces/ITaskRegistry.sol";
import {IGPURegistry} from "./interfaces/IGPURegistry.sol";
import {IPaymentEscrow} from "./interfaces/IPaymentEscrow.sol";
import {ResultLeaf} from "./libraries/ResultLeaf.sol";

/// @title Arbitration
/// @notice The task owner may challenge one result leaf of a committed task during its challenge window, posting a
/// bond and a Merkle proof that the leaf is in the committed results root. Staked verifiers vote until a
/// deadline; then anyone resolves:
/// - more "at fault" votes: the leaf's pipeline miners lose their task lock; the owner gets the whole escrow back,
///   the bond back, and the slashed stake minus the verifiers' reward;
/// - more "correct" votes: the task settles normally; the bond pays the verifiers' reward and the rest goes to the
///   pipeline's miners for their trouble;
/// - no votes, or a tie (the timeout outcome): the results stand, the task settles normally and the bond goes back
///   to the owner in full. Nobody is punished when no one checked.
///
/// Verifiers: anyone who stakes at least `minVerifierStake` of the payment token. A verifier votes only on
/// disputes opened in a block after the one it registered in (so no one can register after seeing a dispute to
/// stuff its votes) and before the block it asked to exit in. Its stake comes back after an unbonding period, at
/// least the voting period, so that it stays put while the verifier can still vote. In this version verifier
/// stake is never slashed: it only makes each vote costly to obtain.
///
/// Random audits (proof of sampling): while a committed task is in its challenge window anyone may draw its audit;
/// the hash of the block the draw lands in seeds it, and anyone seals that seed from the next block on. With `seed` sealed, the task is selected iff
/// `uint256(seed) % 10_000 < auditRateBps`, and the audited line is
/// `uint256(keccak256(abi.encode(seed, uint256(1)))) % requestCount`. Any active verifier may then open a dispute
/// on that line (`openAudit`) on the owner's behalf: the owner is the challenger and beneficiary, the bond comes
/// from the audit pool (funded by anyone, held by the escrow) and goes back to it unless the miners were right,
/// in which case it is forfeited exactly as an owner's bond. Only selected tasks, one line each, at most one
/// dispute per task: no one can aim audits at an honest miner, and the owner pays nothing for them.
///
/// Resolution and voting are never paused.
contract Arbitration is IArbitration, AccessControl {
    using SafeCast for uint256;
    using SafeERC20 for IERC20;

    uint256 public constant MAX_VOTERS = 15;
    uint256 public constant MAX_PIPELINE = 32;
    uint256 public constant MAX_PROOF_LENGTH = 64;
    uint256 public constant MAX_REWARD_BPS = 5_000;
    uint256 public constant MIN_VOTING_PERIOD = 1 minutes;
    uint256 public constant MAX_VERIFIER_UNBONDING = 30 days;
    uint256 public constant MAX_AUDIT_RATE_BPS = 10_000;
    /// @notice Blocks whose hash the EVM still returns: a drawn audit must be sealed within them.
    uint256 public constant BLOCKHASH_WINDOW = 256;
    uint256 private constant BPS = 10_000;

    ITaskRegistry public immutable taskRegistry;
    IGPURegistry public immutable gpuRegistry;
    IPaymentEscrow public immutable escrow;
    /// @notice The payment token (the escrow's): verifier stakes are held here in it.
    IERC20 public immutable token;

    /// @notice Bond the owner posts to open a dispute, token base units.
    uint256 public disputeBond;
    /// @notice Seconds verifiers have to vote after a dispute opens.
    uint256 public votingPeriod;
    /// @notice Share of the slashed stake (at fault) or of the bond (correct) paid to the winning voters.
    uint256 public verifierRewardBps;
    /// @notice Number of disputes opened so far; ids start at 1.
    uint256 public disputeCount;
    /// @notice Smallest stake a verifier registers with, token base units.
    uint256 public minVerifierStake;
    /// @notice Seconds between a verifier's exit request and the withdrawal of its stake.
    uint256 public verifierUnbondingPeriod;
    /// @notice Share of drawn tasks selected for an audit, in basis points; 0 disables audits.
    uint256 public auditRateBps;

    mapping(uint256 disputeId => Dispute) private _disputes;
    mapping(uint256 disputeId => address[]) private _pipelines;
    mapping(uint256 disputeId => address[]) private _voters;
    mapping(uint256 disputeId => mapping(address verifier => Vote)) public voteOf;
    /// @inheritdoc IArbitration
    mapping(uint256 taskId => uint256 disputeId) public disputeOfTask;
    mapping(address account => Verifier) private _verifiers;
    mapping(uint256 taskId => Audit) private _audits;

    struct Config {
        uint256 disputeBond;
        uint256 votingPeriod;
        uint256 verifierRewardBps;
        uint256 minVerifierStake;
        uint256 verifierUnbondingPeriod;
        uint256 auditRateBps;
    }

    /// @dev Checks that stake cannot finish unbonding while a dispute about it could still be open.
    constructor(
        ITaskRegistry taskRegistry_,
        IGPURegistry gpuRegistry_,
        IPaymentEscrow escrow_,
        address admin,
        Config memory config
    ) {
        if (
            address(taskRegistry_) == address(0) || address(gpuRegistry_) == address(0)
                || address(escrow_) == address(0) || admin == address(0)
        ) revert ZeroAddress();
        taskRegistry = taskRegistry_;
        gpuRegistry = gpuRegistry_;
        escrow = escrow_;
        token = escrow_.token();
        _grantRole(DEFAULT_ADMIN_ROLE, admin);
        _setDisputeBond(config.disputeBond);
        // The verifier unbonding period first: the voting period is checked against it.
        _setVerifierUnbondingPeriod(config.verifierUnbondingPeriod);
        _setVotingPeriod(config.votingPeriod);
        _setVerifierReward(config.verifierRewardBps);
        _setMinVerifierStake(config.minVerifierStake);
        _setAuditRate(config.auditRateBps);
    }

    // ---------------------------------------------------------------------------------------------- disputes

    /// @inheritdoc IArbitration
    /// @dev The owner must have approved the escrow for `disputeBond`.
    function openDispute(uint256 taskId, ResultLeaf.Leaf calldata leaf, bytes32[] calldata proof)
        external
        returns (uint256 disputeId)
    {
        ITaskRegistry.Task memory task = taskRegistry.getTask(taskId);
        if (task.owner != msg.sender) revert NotTaskOwner(taskId, msg.sender);
        disputeId = _startDispute(taskId, task, leaf, proof, false);
    }

    /// @inheritdoc IArbitration
    /// @dev Only a verifier registered in a block before the dispute's, and not exiting by then.
    function vote(uint256 disputeId, Vote choice) external {
        Verifier storage verifier = _verifiers[msg.sender];
        if (verifier.stake == 0) revert NotVerifier(msg.sender);
        Dispute storage dispute = _open(disputeId);
        uint256 opened = dispute.openedAtBlock;
        uint256 exitAt = verifier.exitAtBlock;
        if (verifier.registeredAtBlock >= opened || (exitAt != 0 && exitAt <= opened)) {
            revert VerifierNotEligible(disputeId, msg.sender);
        }
        if (block.timestamp >= dispute.votingDeadline) {
            revert VotingClosed(disputeId, dispute.votingDeadline);
        }
        if (choice == Vote.None) revert InvalidVote();
        if (voteOf[disputeId][msg.sender] != Vote.None) revert AlreadyVoted(disputeId, msg.sender);
        address[] storage voters = _voters[disputeId];
        if (voters.length >= MAX_VOTERS) revert TooManyVotes(disputeId, MAX_VOTERS);

        voteOf[disputeId][msg.sender] = choice;
        voters.push(msg.sender);
        if (choice == Vote.MinersAtFault) ++dispute.votesAtFault;
        else ++dispute.votesCorrect;
        emit VoteCast(disputeId, msg.sender, choice);
    }

    /// @inheritdoc IArbitration
    function resolve(uint256 disputeId) external returns (DisputeStatus outcome) {
        Dispute storage dispute = _open(disputeId);
        if (block.timestamp < dispute.votingDeadline) {
            revert VotingStillOpen(disputeId, dispute.votingDeadline);
        }

        address[] storage pipeline = _pipelines[disputeId];
        uint256 slashed;
        uint256 reward;
        uint256 winners;
        if (dispute.votesAtFault > dispute.votesCorrect) {
            outcome = DisputeStatus.MinersAtFault;
            winners = dispute.votesAtFault;
            slashed = taskRegistry.resolveDispute(dispute.taskId, true, pipeline);
            reward = slashed * verifierRewardBps / BPS;
            _payFromSlash(disputeId, dispute.challenger, slashed, reward, Vote.MinersAtFault, winners);
            _returnBond(disputeId, dispute);
        } else if (dispute.votesCorrect > dispute.votesAtFault) {
            outcome = DisputeStatus.MinersCorrect;
            winners = dispute.votesCorrect;
            taskRegistry.resolveDispute(dispute.taskId, false, pipeline);
            reward = uint256(dispute.bond) * verifierRewardBps / BPS;
            _forfeitBond(disputeId, dispute.bond, reward, winners, pipeline);
        } else {
            outcome = DisputeStatus.NoDecision;
            taskRegistry.resolveDispute(dispute.taskId, false, pipeline);
            _returnBond(disputeId, dispute);
        }
        dispute.status = outcome;
        emit DisputeResolved(disputeId, outcome, slashed, reward, winners);
    }

    // ------------------------------------------------------------------------------------------- verifiers

    /// @inheritdoc IArbitration
    /// @dev The caller must have approved this contract for `stake`. The registration takes effect from the next
    /// block on: the verifier votes only on disputes opened after the block it registered in.
    function registerVerifier(uint256 stake) external {
        Verifier storage verifier = _verifiers[msg.sender];
        if (verifier.stake != 0) revert VerifierAlreadyRegistered(msg.sender);
        uint256 minimum = minVerifierStake;
        if (stake < minimum) revert VerifierStakeTooLow(stake, minimum);
        verifier.stake = stake.toUint128();
        verifier.registeredAtBlock = block.number.toUint64();
        token.safeTransferFrom(msg.sender, address(this), stake);
        emit VerifierRegistered(msg.sender, stake);
    }

    /// @inheritdoc IArbitration
    /// @dev The verifier still votes on disputes opened before this block, until their deadlines; the unbonding
    /// period is at least the voting period, so its stake stays here meanwhile.
    function requestVerifierExit() external {
        Verifier storage verifier = _verifiers[msg.sender];
        if (verifier.stake == 0) revert NotVerifier(msg.sender);
        if (verifier.exitAtBlock != 0) revert VerifierExitAlreadyRequested(msg.sender, verifier.releaseAt);
        uint64 releaseAt = (block.timestamp + verifierUnbondingPeriod).toUint64();
        verifier.exitAtBlock = block.number.toUint64();
        verifier.releaseAt = releaseAt;
        emit VerifierExitRequested(msg.sender, releaseAt);
    }

    /// @inheritdoc IArbitration
    /// @dev Verifier stake is never slashed in this version: the whole stake comes back.
    function withdrawVerifierStake() external returns (uint256 amount) {
        Verifier storage verifier = _verifiers[msg.sender];
        amount = verifier.stake;
        if (amount == 0) revert NotVerifier(msg.sender);
        if (verifier.exitAtBlock == 0) revert VerifierExitNotRequested(msg.sender);
        if (block.timestamp < verifier.releaseAt) {
            revert VerifierUnbondingNotFinished(verifier.releaseAt, block.timestamp);
        }
        delete _verifiers[msg.sender];
        token.safeTransfer(msg.sender, amount);
        emit VerifierStakeWithdrawn(msg.sender, amount);
    }

    // ---------------------------------------------------------------------------------------------- audits

    /// @inheritdoc IArbitration
    /// @dev The caller must have approved the escrow for `amount`.
    function fundAuditPool(uint256 amount) external {
        escrow.fundAuditPool(msg.sender, amount);
    }

    /// @inheritdoc IArbitration
    /// @dev Anyone, once per task, while the task is committed and inside its challenge window. A draw whose
    /// seed was never sealed while the hash of block `drawBlock` was available (256 blocks) may be drawn again.
    /// Grinding: that hash is unknown when drawing (it depends on the whole block the draw lands in), except to
    /// the proposer of that block, who can only withhold the block at its own cost. Once the block exists everyone can compute the prospective seed, and someone who
    /// dislikes it can decline to seal; but anyone else (the owner, any verifier) can seal it for 256 blocks, so
    /// a redraw is only bought when no one who wants the audit seals in time. Sealing itself leaves no choice. On a
    /// chain whose sequencer can pick block hashes freely, the sequencer could steer selection.
    function drawAudit(uint256 taskId) external {
        if (auditRateBps == 0) revert AuditsDisabled();
        ITaskRegistry.Task memory task = taskRegistry.getTask(taskId);
        if (task.status == ITaskRegistry.TaskStatus.None) revert ITaskRegistry.UnknownTask(taskId);
        if (task.status != ITaskRegistry.TaskStatus.ResultsCommitted) {
            revert ITaskRegistry.WrongStatus(taskId, task.status, ITaskRegistry.TaskStatus.ResultsCommitted);
        }
        uint256 endsAt = uint256(task.committedAt) + taskRegistry.challengeWindow();
        if (block.timestamp >= endsAt) revert ITaskRegistry.ChallengeWindowClosed(taskId, endsAt);
        Audit storage audit = _audits[taskId];
        uint256 drawn = audit.drawBlock;
        if (drawn != 0 && (audit.seed != 0 || block.number <= drawn + BLOCKHASH_WINDOW)) {
            revert AuditAlreadyDrawn(taskId, drawn);
        }
        audit.drawBlock = block.number.toUint64();
        emit AuditDrawn(taskId, block.number);
    }

    /// @inheritdoc IArbitration
    /// @dev Anyone, from the block after the draw while the hash of block `drawBlock` is available (so a chain
    /// that mines only on demand can seal with the very next transaction):
    /// `seed = keccak256(abi.encode(blockhash(drawBlock), taskId))`; selected iff
    /// `uint256(seed) % 10_000 < auditRateBps` (the rate at sealing time); the audited line is
    /// `uint256(keccak256(abi.encode(seed, uint256(1)))) % requestCount`. All three are fixed from then on.
    function sealAudit(uint256 taskId) external returns (bool selected) {
        Audit storage audit = _audits[taskId];
        uint256 drawn = audit.drawBlock;
        if (drawn == 0) revert AuditNotDrawn(taskId);
        if (audit.seed != 0) revert AuditAlreadySealed(taskId, audit.seed);
        if (block.number <= drawn) revert AuditSeedNotReady(taskId, drawn + 1);
        bytes32 hash = blockhash(drawn);
        if (block.number > drawn + BLOCKHASH_WINDOW || hash == 0) revert AuditSeedExpired(taskId, drawn);
        bytes32 seed = keccak256(abi.encode(hash, taskId));
        selected = uint256(seed) % BPS < auditRateBps;
        uint32 index;
        if (selected) {
            uint256 requestCount = taskRegistry.getTask(taskId).requestCount;
            index = (uint256(keccak256(abi.encode(seed, uint256(1)))) % requestCount).toUint32();
        }
        audit.seed = seed;
        audit.selected = selected;
        audit.requestIndex = index;
        emit AuditSealed(taskId, seed, selected, index);
    }

    /// @inheritdoc IArbitration
    /// @dev Only an active verifier, on the selected line of a selected task, with the same checks as
    /// `openDispute`. The task owner is the challenger; the bond comes from the audit pool, and when the pool
    /// cannot cover it the escrow reverts with `AuditPoolTooSmall(pool, bond)`.
    function openAudit(uint256 taskId, ResultLeaf.Leaf calldata leaf, bytes32[] calldata proof)
        external
        returns (uint256 disputeId)
    {
        if (!isVerifier(msg.sender)) revert NotVerifier(msg.sender);
        Audit storage audit = _audits[taskId];
        if (audit.seed == 0) revert AuditNotSealed(taskId);
        if (!audit.selected) revert TaskNotSelected(taskId);
        if (leaf.requestIndex != audit.requestIndex) {
            revert NotAuditedLine(taskId, leaf.requestIndex, audit.requestIndex);
        }
        disputeId = _startDispute(taskId, taskRegistry.getTask(taskId), leaf, proof, true);
        emit AuditOpened(disputeId, taskId, msg.sender);
    }

    // ------------------------------------------------------------------------------------------------ admin

    function setDisputeBond(uint256 bond) external onlyRole(DEFAULT_ADMIN_ROLE) {
        _setDisputeBond(bond);
    }

    function setVotingPeriod(uint256 period) external onlyRole(DEFAULT_ADMIN_ROLE) {
        _setVotingPeriod(period);
    }

    function setVerifierReward(uint256 bps) external onlyRole(DEFAULT_ADMIN_ROLE) {
        _setVerifierReward(bps);
    }

    function setMinVerifierStake(uint256 amount) external onlyRole(DEFAULT_ADMIN_ROLE) {
        _setMinVerifierStake(amount);
    }

    /// @notice Sets the unbonding period for future exit requests.
    function setVerifierUnbondingPeriod(uint256 period) external onlyRole(DEFAULT_ADMIN_ROLE) {
        _setVerifierUnbondingPeriod(period);
    }

    /// @notice Sets the audit rate for seeds sealed from now on.
    function setAuditRate(uint256 bps) external onlyRole(DEFAULT_ADMIN_ROLE) {
        _setAuditRate(bps);
    }

    // ------------------------------------------------------------------------------------------------ views

    /// @inheritdoc IArbitration
    function verifyLeaf(bytes32 resultsRoot, ResultLeaf.Leaf calldata leaf, bytes32[] calldata proof)
        external
        pure
        returns (bool)
    {
        return MerkleProof.verifyCalldata(proof, resultsRoot, ResultLeaf.hash(leaf));
    }

    /// @inheritdoc IArbitration
    function getDispute(uint256 disputeId) external view returns (Dispute memory) {
        return _disputes[disputeId];
    }

    /// @inheritdoc IArbitration
    function pipelineOf(uint256 disputeId) external view returns (address[] memory) {
        return _pipelines[disputeId];
    }

    /// @inheritdoc IArbitration
    function votersOf(uint256 disputeId) external view returns (address[] memory) {
        return _voters[disputeId];
    }

    /// @inheritdoc IArbitration
    function isVerifier(address account) public view returns (bool) {
        Verifier storage verifier = _verifiers[account];
        return verifier.stake != 0 && verifier.exitAtBlock == 0;
    }

    /// @inheritdoc IArbitration
    function verifierOf(address account) external view returns (Verifier memory) {
        return _verifiers[account];
    }

    /// @inheritdoc IArbitration
    function auditOf(uint256 taskId) external view returns (Audit memory) {
        return _audits[taskId];
    }

    // --------------------------------------------------------------------------------------------- internal

    /// @dev What `openDispute` and `openAudit` share: one dispute per task; the leaf, bound to the task, proven in
    /// the committed results root; the task frozen (which reverts unless it is committed and inside its challenge
    /// window); the bond posted by the owner or out of the audit pool.
    function _startDispute(
        uint256 taskId,
        ITaskRegistry.Task memory task,
        ResultLeaf.Leaf calldata leaf,
        bytes32[] calldata proof,
        bool audit
    ) private returns (uint256 disputeId) {
        uint256 existing = disputeOfTask[taskId];
        if (existing != 0) revert DisputeAlreadyOpen(taskId, existing);
        if (leaf.taskId != taskId) revert LeafTaskMismatch(taskId, leaf.taskId);
        if (proof.length > MAX_PROOF_LENGTH) revert ProofTooLong(proof.length, MAX_PROOF_LENGTH);
        if (leaf.pipeline.length > MAX_PIPELINE) revert PipelineTooLong(leaf.pipeline.length, MAX_PIPELINE);
        bytes32 leafHash = ResultLeaf.hash(leaf);
        if (!MerkleProof.verifyCalldata(proof, task.resultsRoot, leafHash)) revert InvalidProof();

        disputeId = ++disputeCount;
        uint128 bond = disputeBond.toUint128();
        uint64 votingDeadline = (block.timestamp + votingPeriod).toUint64();
        _disputes[disputeId] = Dispute({
            taskId: taskId,
            challenger: task.owner,
            votingDeadline: votingDeadline,
            status: DisputeStatus.Open,
            votesCorrect: 0,
            votesAtFault: 0,
            bond: bond,
            requestIndex: leaf.requestIndex,
            openedAtBlock: block.number.toUint64(),
            audit: audit,
            leafHash: leafHash
        });
        _pipelines[disputeId] = leaf.pipeline;
        disputeOfTask[taskId] = disputeId;

        taskRegistry.markDisputed(taskId);
        if (audit) escrow.depositBondFromAuditPool(disputeId, bond);
        else escrow.depositBond(disputeId, task.owner, bond);
        emit DisputeOpened(disputeId, taskId, task.owner, leaf.requestIndex, leafHash, bond, votingDeadline);
    }

    /// @dev The whole bond back to whoever posted it: the challenger, or the audit pool.
    function _returnBond(uint256 disputeId, Dispute storage dispute) private {
        if (dispute.audit) escrow.returnBondToAuditPool(disputeId);
        else escrow.settleBond(disputeId, new address[](0), new uint256[](0), dispute.challenger);
    }

    function _open(uint256 disputeId) private view returns (Dispute storage dispute) {
        dispute = _disputes[disputeId];
        if (dispute.status == DisputeStatus.None) revert UnknownDispute(disputeId);
        if (dispute.status != DisputeStatus.Open) revert DisputeNotOpen(disputeId);
    }

    /// @dev Slashed stake already sits in the escrow: the winning voters share `reward` equally, the owner gets the
    /// rest (including rounding dust).
    function _payFromSlash(
        uint256 disputeId,
        address challenger,
        uint256 slashed,
        uint256 reward,
        Vote winningVote,
        uint256 winners
    ) private {
        (address[] memory payees, uint256[] memory amounts) =
            _voterShares(disputeId, winningVote, winners, reward, 1);
        payees[winners] = challenger;
        amounts[winners] = slashed - reward / winners * winners;
        escrow.creditReceived(payees, amounts);
    }

    /// @dev The winning voters share `reward`; the rest of the bond goes to the pipeline's miners in equal parts,
    /// with rounding dust to the first. A leaf with no pipeline sends the rest to the coordinator's fee recipient.
    function _forfeitBond(
        uint256 disputeId,
        uint256 bond,
        uint256 reward,
        uint256 winners,
        address[] storage pipeline
    ) private {
        uint256 miners = pipeline.length;
        (address[] memory payees, uint256[] memory amounts) =
            _voterShares(disputeId, Vote.MinersCorrect, winners, reward, miners);
        uint256 rest = bond - reward / winners * winners;
        if (miners == 0) {
            escrow.settleBond(disputeId, payees, amounts, _feeRecipient());
            return;
        }
        for (uint256 i = 0; i < miners; ++i) {
            payees[winners + i] = _payableOrFeeRecipient(pipeline[i]);
            amounts[winners + i] = rest / miners;
        }
        // Rounding dust is the bond's remainder and goes to the first pipeline miner.
        escrow.settleBond(disputeId, payees, amounts, _payableOrFeeRecipient(pipeline[0]));
    }

    /// @dev A committed leaf may name the zero address in its pipeline (the miners signed whatever the coordinator
    /// built). Its share goes to the fee recipient, so such a leaf can neither block resolution nor escape disputes.
    function _payableOrFeeRecipient(address account) private view returns (address) {
        return account == address(0) ? _feeRecipient() : account;
    }

    /// @dev Arrays with one equal share of `reward` per winning voter, and `extra` empty slots after them.
    function _voterShares(uint256 disputeId, Vote winningVote, uint256 winners, uint256 reward, uint256 extra)
        private
        view
        returns (address[] memory payees, uint256[] memory amounts)
    {
        payees = new address[](winners + extra);
        amounts = new uint256[](winners + extra);
        address[] storage voters = _voters[disputeId];
        uint256 share = reward / winners;
        uint256 next;
        for (uint256 i = 0; i < voters.length; ++i) {
            // bounded by MAX_VOTERS
            if (voteOf[disputeId][voters[i]] == winningVote) {
                payees[next] = voters[i];
                amounts[next] = share;
                ++next;
            }
        }
    }

    function _feeRecipient() private view returns (address) {
        return taskRegistry.feeRecipient();
    }

    function _setDisputeBond(uint256 bond) private {
        if (bond == 0) revert ZeroBond();
        disputeBond = bond;
        emit DisputeBondChanged(bond);
    }

    function _setVotingPeriod(uint256 period) private {
        if (period < MIN_VOTING_PERIOD) revert VotingPeriodTooShort(period, MIN_VOTING_PERIOD);
        uint256 exposure = taskRegistry.challengeWindow() + period;
        uint256 unbonding = gpuRegistry.unbondingPeriod();
        if (unbonding <= exposure) revert UnbondingTooShort(unbonding, exposure);
        uint256 verifierUnbonding = verifierUnbondingPeriod;
        if (verifierUnbonding < period) revert VerifierUnbondingTooShort(verifierUnbonding, period);
        votingPeriod = period;
        emit VotingPeriodChanged(period);
    }

    function _setVerifierReward(uint256 bps) private {
        if (bps > MAX_REWARD_BPS) revert RewardTooHigh(bps, MAX_REWARD_BPS);
        verifierRewardBps = bps;
        emit VerifierRewardChanged(bps);
    }

    function _setMinVerifierStake(uint256 amount) private {
        if (amount == 0) revert ZeroVerifierStake();
        minVerifierStake = amount;
        emit MinVerifierStakeChanged(amount);
    }

    /// @dev At least the voting period, so that a verifier's stake stays while it can still vote; at most
    /// MAX_VERIFIER_UNBONDING, so that the admin cannot trap stake.
    function _setVerifierUnbondingPeriod(uint256 period) private {
        if (period < votingPeriod) revert VerifierUnbondingTooShort(period, votingPeriod);
        if (period > MAX_VERIFIER_UNBONDING) revert VerifierUnbondingTooLong(period, MAX_VERIFIER_UNBONDING);
        verifierUnbondingPeriod = period;
        emit VerifierUnbondingPeriodChanged(period);
    }

    function _setAuditRate(uint256 bps) private {
        if (bps > MAX_AUDIT_RATE_BPS) revert AuditRateTooHigh(bps, MAX_AUDIT_RATE_BPS);
        auditRateBps = bps;
        emit AuditRateChanged(bps);
    }
}
