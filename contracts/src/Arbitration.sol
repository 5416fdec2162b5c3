// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {AccessControl} from "@openzeppelin/contracts/access/AccessControl.sol";
import {MerkleProof} from "@openzeppelin/contracts/utils/cryptography/MerkleProof.sol";
import {SafeCast} from "@openzeppelin/contracts/utils/math/SafeCast.sol";
import {IArbitration} from "./interfaces/IArbitration.sol";
import {ITaskRegistry} from "./interfaces/ITaskRegistry.sol";
import {IGPURegistry} from "./interfaces/IGPURegistry.sol";
import {IPaymentEscrow} from "./interfaces/IPaymentEscrow.sol";
import {ResultLeaf} from "./libraries/ResultLeaf.sol";

/// @title Arbitration
/// @notice The task owner may challenge one result leaf of a committed task during its challenge window, posting a
/// bond and a Merkle proof that the leaf is in the committed results root. Registered verifiers vote until a
/// deadline; then anyone resolves:
/// - more "at fault" votes: the leaf's pipeline miners lose their task lock; the owner gets the whole escrow back,
///   the bond back, and the slashed stake minus the verifiers' reward;
/// - more "correct" votes: the task settles normally; the bond pays the verifiers' reward and the rest goes to the
///   pipeline's miners for their trouble;
/// - no votes, or a tie (the timeout outcome): the results stand, the task settles normally and the bond goes back
///   to the owner in full. Nobody is punished when no one checked.
/// Resolution and voting are never paused.
contract Arbitration is IArbitration, AccessControl {
    using SafeCast for uint256;

    /// @notice Role of registered verifiers.
    bytes32 public constant VERIFIER_ROLE = keccak256("VERIFIER_ROLE");

    uint256 public constant MAX_VOTERS = 15;
    uint256 public constant MAX_PIPELINE = 32;
    uint256 public constant MAX_PROOF_LENGTH = 64;
    uint256 public constant MAX_REWARD_BPS = 5_000;
    uint256 public constant MIN_VOTING_PERIOD = 1 minutes;
    uint256 private constant BPS = 10_000;

    ITaskRegistry public immutable taskRegistry;
    IGPURegistry public immutable gpuRegistry;
    IPaymentEscrow public immutable escrow;

    /// @notice Bond the owner posts to open a dispute, token base units.
    uint256 public disputeBond;
    /// @notice Seconds verifiers have to vote after a dispute opens.
    uint256 public votingPeriod;
    /// @notice Share of the slashed stake (at fault) or of the bond (correct) paid to the winning voters.
    uint256 public verifierRewardBps;
    /// @notice Number of disputes opened so far; ids start at 1.
    uint256 public disputeCount;

    mapping(uint256 disputeId => Dispute) private _disputes;
    mapping(uint256 disputeId => address[]) private _pipelines;
    mapping(uint256 disputeId => address[]) private _voters;
    mapping(uint256 disputeId => mapping(address verifier => Vote)) public voteOf;
    /// @inheritdoc IArbitration
    mapping(uint256 taskId => uint256 disputeId) public disputeOfTask;

    struct Config {
        uint256 disputeBond;
        uint256 votingPeriod;
        uint256 verifierRewardBps;
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
        _grantRole(DEFAULT_ADMIN_ROLE, admin);
        _setDisputeBond(config.disputeBond);
        _setVotingPeriod(config.votingPeriod);
        _setVerifierReward(config.verifierRewardBps);
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
            challenger: msg.sender,
            votingDeadline: votingDeadline,
            status: DisputeStatus.Open,
            votesCorrect: 0,
            votesAtFault: 0,
            bond: bond,
            requestIndex: leaf.requestIndex,
            leafHash: leafHash
        });
        _pipelines[disputeId] = leaf.pipeline;
        disputeOfTask[taskId] = disputeId;

        // Reverts unless the task is committed and inside its challenge window.
        taskRegistry.markDisputed(taskId);
        escrow.depositBond(disputeId, msg.sender, bond);
        emit DisputeOpened(disputeId, taskId, msg.sender, leaf.requestIndex, leafHash, bond, votingDeadline);
    }

    /// @inheritdoc IArbitration
    function vote(uint256 disputeId, Vote choice) external onlyRole(VERIFIER_ROLE) {
        Dispute storage dispute = _open(disputeId);
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
            escrow.settleBond(disputeId, new address[](0), new uint256[](0), dispute.challenger);
        } else if (dispute.votesCorrect > dispute.votesAtFault) {
            outcome = DisputeStatus.MinersCorrect;
            winners = dispute.votesCorrect;
            taskRegistry.resolveDispute(dispute.taskId, false, pipeline);
            reward = uint256(dispute.bond) * verifierRewardBps / BPS;
            _forfeitBond(disputeId, dispute.bond, reward, winners, pipeline);
        } else {
            outcome = DisputeStatus.NoDecision;
            taskRegistry.resolveDispute(dispute.taskId, false, pipeline);
            escrow.settleBond(disputeId, new address[](0), new uint256[](0), dispute.challenger);
        }
        dispute.status = outcome;
        emit DisputeResolved(disputeId, outcome, slashed, reward, winners);
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

    // --------------------------------------------------------------------------------------------- internal

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
        votingPeriod = period;
        emit VotingPeriodChanged(period);
    }

    function _setVerifierReward(uint256 bps) private {
        if (bps > MAX_REWARD_BPS) revert RewardTooHigh(bps, MAX_REWARD_BPS);
        verifierRewardBps = bps;
        emit VerifierRewardChanged(bps);
    }
}
