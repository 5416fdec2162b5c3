// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {ResultLeaf} from "../libraries/ResultLeaf.sol";

/// @title IArbitration
/// @notice Disputes over single result leaves, decided by staked verifiers: opened by the task owner, or by a
/// verifier as a random audit of a task the chain selected, with the bond paid from the audit pool.
interface IArbitration {
    /// @notice Open: voting runs. MinersAtFault: the leaf was wrong, its pipeline was slashed.
    /// MinersCorrect: the leaf was right, the bond was forfeited. NoDecision: no votes or a tie by the deadline;
    /// results stand and the bond goes back to whoever posted it (the challenger, or the audit pool).
    enum DisputeStatus {
        None,
        Open,
        MinersAtFault,
        MinersCorrect,
        NoDecision
    }

    enum Vote {
        None,
        MinersCorrect,
        MinersAtFault
    }

    /// @notice `challenger` is the task owner, who gets the refund and the slash share if the miners were at
    /// fault; for an audit it posted nothing (`audit`: the bond came from the audit pool and goes back there).
    /// Only verifiers registered before `openedAtBlock` (and not exiting by then) may vote.
    struct Dispute {
        uint256 taskId;
        address challenger;
        uint64 votingDeadline;
        DisputeStatus status;
        uint8 votesCorrect;
        uint8 votesAtFault;
        uint128 bond;
        uint32 requestIndex;
        uint64 openedAtBlock;
        bool audit;
        bytes32 leafHash;
    }

    /// @notice A staked verifier. Votes on disputes opened in blocks strictly after `registeredAtBlock` and, once
    /// it asked to exit, strictly before `exitAtBlock` (0 while active); `releaseAt` is when its stake can be
    /// withdrawn (0 while active).
    struct Verifier {
        uint128 stake;
        uint64 registeredAtBlock;
        uint64 exitAtBlock;
        uint64 releaseAt;
    }

    /// @notice A task's audit draw. `drawBlock`: 0 if never drawn. `seed`: 0 until sealed. `selected` and
    /// `requestIndex` (the audited line, 0 unless selected) are fixed when the seed is sealed. Packed: the first
    /// three fields share one storage slot.
    struct Audit {
        uint64 drawBlock;
        bool selected;
        uint32 requestIndex;
        bytes32 seed;
    }

    error ZeroAddress();
    error ZeroBond();
    error NotTaskOwner(uint256 taskId, address caller);
    error LeafTaskMismatch(uint256 taskId, uint256 leafTaskId);
    error InvalidProof();
    error ProofTooLong(uint256 length, uint256 maximum);
    error PipelineTooLong(uint256 length, uint256 maximum);
    error DisputeAlreadyOpen(uint256 taskId, uint256 disputeId);
    error UnknownDispute(uint256 disputeId);
    error DisputeNotOpen(uint256 disputeId);
    error VotingClosed(uint256 disputeId, uint256 deadline);
    error VotingStillOpen(uint256 disputeId, uint256 deadline);
    error AlreadyVoted(uint256 disputeId, address verifier);
    error TooManyVotes(uint256 disputeId, uint256 maximum);
    error InvalidVote();
    error RewardTooHigh(uint256 bps, uint256 maximum);
    error VotingPeriodTooShort(uint256 period, uint256 minimum);
    error UnbondingTooShort(uint256 unbondingPeriod, uint256 challengeWindowPlusVoting);

    error ZeroVerifierStake();
    error NotVerifier(address account);
    error VerifierAlreadyRegistered(address verifier);
    error VerifierStakeTooLow(uint256 stake, uint256 minimum);
    error VerifierExitAlreadyRequested(address verifier, uint256 releaseAt);
    error VerifierExitNotRequested(address verifier);
    error VerifierUnbondingNotFinished(uint256 releaseAt, uint256 nowTime);
    error VerifierNotEligible(uint256 disputeId, address verifier);
    error VerifierUnbondingTooShort(uint256 verifierUnbondingPeriod, uint256 votingPeriod);
    error VerifierUnbondingTooLong(uint256 verifierUnbondingPeriod, uint256 maximum);

    error AuditsDisabled();
    error AuditRateTooHigh(uint256 bps, uint256 maximum);
    error AuditAlreadyDrawn(uint256 taskId, uint256 drawBlock);
    error AuditNotDrawn(uint256 taskId);
    error AuditAlreadySealed(uint256 taskId, bytes32 seed);
    error AuditSeedNotReady(uint256 taskId, uint256 readyAtBlock);
    error AuditSeedExpired(uint256 taskId, uint256 drawBlock);
    error AuditNotSealed(uint256 taskId);
    error TaskNotSelected(uint256 taskId);
    error NotAuditedLine(uint256 taskId, uint256 requestIndex, uint256 selectedIndex);

    event DisputeOpened(
        uint256 indexed disputeId,
        uint256 indexed taskId,
        address indexed challenger,
        uint32 requestIndex,
        bytes32 leafHash,
        uint128 bond,
        uint64 votingDeadline
    );
    event VoteCast(uint256 indexed disputeId, address indexed verifier, Vote vote);
    event DisputeResolved(
        uint256 indexed disputeId,
        DisputeStatus outcome,
        uint256 slashed,
        uint256 verifierReward,
        uint256 voters
    );
    event DisputeBondChanged(uint256 bond);
    event VotingPeriodChanged(uint256 period);
    event VerifierRewardChanged(uint256 bps);

    event VerifierRegistered(address indexed verifier, uint256 stake);
    event VerifierExitRequested(address indexed verifier, uint256 releaseAt);
    event VerifierStakeWithdrawn(address indexed verifier, uint256 amount);
    event MinVerifierStakeChanged(uint256 minimum);
    event VerifierUnbondingPeriodChanged(uint256 period);

    event AuditDrawn(uint256 indexed taskId, uint256 drawBlock);
    event AuditSealed(uint256 indexed taskId, bytes32 seed, bool selected, uint32 requestIndex);
    event AuditOpened(uint256 indexed disputeId, uint256 indexed taskId, address indexed auditor);
    event AuditRateChanged(uint256 bps);

    function openDispute(uint256 taskId, ResultLeaf.Leaf calldata leaf, bytes32[] calldata proof)
        external
        returns (uint256 disputeId);
    function vote(uint256 disputeId, Vote choice) external;
    function resolve(uint256 disputeId) external returns (DisputeStatus outcome);

    /// @notice Stakes `stake` (at least `minVerifierStake`) and becomes a verifier from the next block on.
    function registerVerifier(uint256 stake) external;
    /// @notice Stops voting on disputes opened from now on and starts the unbonding period.
    function requestVerifierExit() external;
    /// @notice After the unbonding period: returns the whole stake and forgets the verifier.
    function withdrawVerifierStake() external returns (uint256 amount);

    /// @notice Adds `amount` to the audit pool (held by the escrow), which posts the bonds of audits.
    function fundAuditPool(uint256 amount) external;
    /// @notice Starts a task's audit draw: its seed will come from the hash of this transaction's block.
    function drawAudit(uint256 taskId) external;
    /// @notice Fixes the seed of a drawn audit, and with it whether the task is selected and which line.
    function sealAudit(uint256 taskId) external returns (bool selected);
    /// @notice Opens a dispute, as an audit, on the selected line of a selected task.
    function openAudit(uint256 taskId, ResultLeaf.Leaf calldata leaf, bytes32[] calldata proof)
        external
        returns (uint256 disputeId);

    /// @notice Whether `proof` shows `leaf` is in the tree of `resultsRoot`, exactly as `openDispute` checks it.
    function verifyLeaf(bytes32 resultsRoot, ResultLeaf.Leaf calldata leaf, bytes32[] calldata proof)
        external
        pure
        returns (bool);
    function getDispute(uint256 disputeId) external view returns (Dispute memory);
    function pipelineOf(uint256 disputeId) external view returns (address[] memory);
    function votersOf(uint256 disputeId) external view returns (address[] memory);
    function disputeOfTask(uint256 taskId) external view returns (uint256);
    /// @notice Whether `account` is a verifier now: registered and not exiting (it may open audits).
    function isVerifier(address account) external view returns (bool);
    function verifierOf(address account) external view returns (Verifier memory);
    function auditOf(uint256 taskId) external view returns (Audit memory);
}
