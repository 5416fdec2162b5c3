// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {ResultLeaf} from "../libraries/ResultLeaf.sol";

/// @title IArbitration
/// @notice Disputes over single result leaves, decided by registered verifiers.
interface IArbitration {
    /// @notice Open: voting runs. MinersAtFault: the leaf was wrong, its pipeline was slashed.
    /// MinersCorrect: the leaf was right, the bond was forfeited. NoDecision: no votes or a tie by the deadline;
    /// results stand and the bond goes back to the challenger.
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

    struct Dispute {
        uint256 taskId;
        address challenger;
        uint64 votingDeadline;
        DisputeStatus status;
        uint8 votesCorrect;
        uint8 votesAtFault;
        uint128 bond;
        uint32 requestIndex;
        bytes32 leafHash;
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

    function openDispute(uint256 taskId, ResultLeaf.Leaf calldata leaf, bytes32[] calldata proof)
        external
        returns (uint256 disputeId);
    function vote(uint256 disputeId, Vote choice) external;
    function resolve(uint256 disputeId) external returns (DisputeStatus outcome);

    /// @notice Whether `proof` shows `leaf` is in the tree of `resultsRoot`, exactly as `openDispute` checks it.
    function verifyLeaf(bytes32 resultsRoot, ResultLeaf.Leaf calldata leaf, bytes32[] calldata proof)
        external
        pure
        returns (bool);
    function getDispute(uint256 disputeId) external view returns (Dispute memory);
    function pipelineOf(uint256 disputeId) external view returns (address[] memory);
    function votersOf(uint256 disputeId) external view returns (address[] memory);
    function disputeOfTask(uint256 taskId) external view returns (uint256);
}
