// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {ResultLeaf} from "../libraries/ResultLeaf.sol";

/// @title ILineChallenges
/// @notice Every billed line is answerable: during a task's challenge window its owner may name positions of the
/// committed results tree; each must be answered in time with the leaf at that position, its proof and, when the
/// leaf bills tokens, a served proof of an assigned miner whose signature covers it. A challenge nobody answers
/// shows that the task's signers vouched for a tree that does not hold an accountable line there: they are
/// slashed and the owner refunded in full.
interface ILineChallenges {
    /// @notice None: never challenged. Open: waiting for an answer until `answerBy`. Answered: the line was shown.
    /// Unanswered: nobody showed it in time; the task was refunded.
    enum ChallengeStatus {
        None,
        Open,
        Answered,
        Unanswered
    }

    struct Challenge {
        ChallengeStatus status;
        uint64 openedAt;
        uint64 answerBy;
    }

    error NotTaskOwner(uint256 taskId, address caller);
    error ChallengeWindowClosed(uint256 taskId, uint256 endedAt);
    error IndexOutOfRange(uint256 index, uint256 requestCount);
    error AlreadyChallenged(uint256 taskId, uint256 index, ChallengeStatus status);
    error TooManyChallenges(uint256 taskId, uint256 maximum);
    error NotOpen(uint256 taskId, uint256 index);
    error AnswerTooLate(uint256 taskId, uint256 index, uint256 answerBy);
    error AnswerPeriodNotOver(uint256 taskId, uint256 index, uint256 answerBy);
    error InvalidProof();

    event LineChallenged(uint256 indexed taskId, uint256 indexed index, uint256 answerBy);
    event LineAnswered(uint256 indexed taskId, uint256 indexed index, address answerer, bytes32 leafHash);
    event LineUnanswered(uint256 indexed taskId, uint256 indexed index, uint256 slashed);

    /// @notice The task's owner names position `index` of its committed results tree (inside the challenge
    /// window, at most MAX_CHALLENGES per task); the task cannot finalize until it is answered or settled.
    function challengeLine(uint256 taskId, uint256 index) external;

    /// @notice Anyone answers an open challenge of `leaf.requestIndex` before its `answerBy`: the leaf's results
    /// proof, and when it bills tokens, a served proof for each miner of its pipeline (as `accountableFor`).
    function answerLine(
        uint256 taskId,
        ResultLeaf.Leaf calldata leaf,
        bytes32[] calldata proof,
        bytes32[][] calldata servedProofs
    ) external;

    /// @notice Anyone, after `answerBy` of an open challenge: the task's signers lose their stake lock to the audit
    /// pool (no party's: an owner holding a signer's key could otherwise cash its lock with a challenge it lets go
    /// unanswered), the owner is refunded in full; miners that did not sign are unlocked.
    function settleUnanswered(uint256 taskId, uint256 index) external;

    /// @notice The challenge of position `index` of task `taskId` (status None if it was never challenged).
    function challengeOf(uint256 taskId, uint256 index) external view returns (Challenge memory);

    /// @notice Every position of task `taskId` its owner has challenged, in order (at most MAX_CHALLENGES).
    function challengedLinesOf(uint256 taskId) external view returns (uint32[] memory);

    /// @notice Seconds an answer may take from the challenge, fixed at deployment.
    function answerPeriod() external view returns (uint256);
}
