// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {SafeCast} from "@openzeppelin/contracts/utils/math/SafeCast.sol";
import {ILineChallenges} from "./interfaces/ILineChallenges.sol";
import {IPaymentEscrow} from "./interfaces/IPaymentEscrow.sol";
import {ITaskRegistry} from "./interfaces/ITaskRegistry.sol";
import {PositionalMerkle} from "./libraries/PositionalMerkle.sol";
import {ResultLeaf} from "./libraries/ResultLeaf.sol";

/// @title LineChallenges
/// @notice The owner's hold on what it pays for: any position of a committed results tree it names must be shown,
/// in time, to hold a leaf that bills nothing or that a signing miner's served root holds (so a dispute of it has
/// someone to convict). A tree of another size than the task's request count, a subtree no one can open, or a
/// billed line no signer vouched for cannot be shown: the challenge goes unanswered and the signers, who vouched
/// for the whole commitment, lose their stake lock to the audit pool, and the owner is refunded in full, as a
/// refutation does.
/// A miner that signs keeps every leaf of what it signed, so an honest signer can always answer.
/// @dev Acts on the task registry with its arbiter role (a challenge holds the task as a dispute does) and on the
/// escrow with its arbiter role (to pool the slashed locks). It has no owner and no parameter to
/// change: the answer period is fixed at deployment.
contract LineChallenges is ILineChallenges {
    using SafeCast for uint256;

    /// @notice Most positions one task's owner may challenge: it bounds what answering can cost the miners.
    uint256 public constant MAX_CHALLENGES = 16;

    ITaskRegistry public immutable taskRegistry;
    IPaymentEscrow public immutable escrow;
    /// @inheritdoc ILineChallenges
    uint256 public immutable answerPeriod;

    mapping(uint256 taskId => mapping(uint256 index => Challenge)) private _challenges;
    mapping(uint256 taskId => uint32[]) private _challengedLines;
    /// @dev Per task: how many challenges are open, and since when one has been (the task is held from then).
    mapping(uint256 taskId => uint256) private _openCount;
    mapping(uint256 taskId => uint256) private _heldSince;

    constructor(ITaskRegistry taskRegistry_, IPaymentEscrow escrow_, uint256 answerPeriod_) {
        taskRegistry = taskRegistry_;
        escrow = escrow_;
        answerPeriod = answerPeriod_;
    }

    /// @inheritdoc ILineChallenges
    /// @dev The registry's `markDisputed` checks the task is committed (or already disputed).
    function challengeLine(uint256 taskId, uint256 index) external {
        ITaskRegistry.Task memory task = taskRegistry.getTask(taskId);
        if (msg.sender != task.owner) revert NotTaskOwner(taskId, msg.sender);
        uint256 endsAt = taskRegistry.challengeEndsAt(taskId);
        if (block.timestamp >= endsAt) revert ChallengeWindowClosed(taskId, endsAt);
        if (index >= task.requestCount) revert IndexOutOfRange(index, task.requestCount);
        Challenge storage challenge = _challenges[taskId][index];
        if (challenge.status != ChallengeStatus.None) {
            revert AlreadyChallenged(taskId, index, challenge.status);
        }
        uint32[] storage challenged = _challengedLines[taskId];
        if (challenged.length == MAX_CHALLENGES) revert TooManyChallenges(taskId, MAX_CHALLENGES);
        challenged.push(index.toUint32());
        uint256 answerBy = block.timestamp + answerPeriod;
        challenge.status = ChallengeStatus.Open;
        challenge.openedAt = block.timestamp.toUint64();
        challenge.answerBy = answerBy.toUint64();
        if (_openCount[taskId]++ == 0) _heldSince[taskId] = block.timestamp;
        taskRegistry.markDisputed(taskId);
        emit LineChallenged(taskId, index, answerBy);
    }

    /// @inheritdoc ILineChallenges
    /// @dev The owner keeps the time the task was held to dispute in: once no challenge of it is open, its window
    /// is extended by the time since the first of the open ones was made (overlapping challenges hold it once).
    function answerLine(
        uint256 taskId,
        ResultLeaf.Leaf calldata leaf,
        bytes32[] calldata proof,
        bytes32[][] calldata servedProofs
    ) external {
        Challenge storage challenge = _open(taskId, leaf.requestIndex);
        if (block.timestamp > challenge.answerBy) {
            revert AnswerTooLate(taskId, leaf.requestIndex, challenge.answerBy);
        }
        bytes32 leafHash;
        if (leaf.inputTokens == 0 && leaf.outputTokens == 0) {
            leafHash = _provenUnbilled(taskId, leaf, proof);
        } else {
            // Reverts unless the leaf is at its position and some miner of its pipeline signed a served root
            // that holds it.
            (leafHash,) = taskRegistry.accountableFor(taskId, leaf, proof, servedProofs);
        }
        challenge.status = ChallengeStatus.Answered;
        if (--_openCount[taskId] == 0) {
            taskRegistry.extendChallenge(taskId, block.timestamp - _heldSince[taskId]);
        }
        taskRegistry.resolveDispute(taskId, false, new address[](0), false);
        emit LineAnswered(taskId, leaf.requestIndex, msg.sender, leafHash);
    }

    /// @inheritdoc ILineChallenges
    function settleUnanswered(uint256 taskId, uint256 index) external {
        Challenge storage challenge = _open(taskId, index);
        if (block.timestamp <= challenge.answerBy) {
            revert AnswerPeriodNotOver(taskId, index, challenge.answerBy);
        }
        challenge.status = ChallengeStatus.Unanswered;
        --_openCount[taskId];
        uint256 slashed = taskRegistry.resolveDispute(taskId, true, _signers(taskId), false);
        // What the slashes sent to the escrow goes to the audit pool, as a refutation's does (nothing when an
        // earlier verdict settled the task): the owner's refund in full is its due.
        escrow.absorbReceived();
        escrow.distribute(new address[](0), new uint256[](0));
        emit LineUnanswered(taskId, index, slashed);
    }

    /// @inheritdoc ILineChallenges
    function challengeOf(uint256 taskId, uint256 index) external view returns (Challenge memory) {
        return _challenges[taskId][index];
    }

    /// @inheritdoc ILineChallenges
    function challengedLinesOf(uint256 taskId) external view returns (uint32[] memory) {
        return _challengedLines[taskId];
    }

    function _open(uint256 taskId, uint256 index) private view returns (Challenge storage challenge) {
        challenge = _challenges[taskId][index];
        if (challenge.status != ChallengeStatus.Open) revert NotOpen(taskId, index);
    }

    /// @dev A leaf that bills no token needs no accountable miner, only to be at its position in the tree.
    function _provenUnbilled(uint256 taskId, ResultLeaf.Leaf calldata leaf, bytes32[] calldata proof)
        private
        view
        returns (bytes32 leafHash)
    {
        ITaskRegistry.Task memory task = taskRegistry.getTask(taskId);
        if (leaf.taskId != taskId) revert InvalidProof();
        leafHash = ResultLeaf.hash(leaf);
        (bytes32 root,,) =
            PositionalMerkle.rootOf(proof, leafHash, 0, 0, leaf.requestIndex, task.requestCount);
        if (root == bytes32(0) || root != task.resultsRoot) revert InvalidProof();
    }

    /// @dev The assigned miners whose signature (or on-chain vouch) the commitment carries.
    function _signers(uint256 taskId) private view returns (address[] memory signers) {
        address[] memory miners = taskRegistry.minersOf(taskId);
        uint256 mask = taskRegistry.signedMaskOf(taskId);
        signers = new address[](miners.length);
        uint256 found;
        for (uint256 i = 0; i < miners.length; ++i) {
            if (mask & (1 << i) != 0) signers[found++] = miners[i];
        }
        assembly ("memory-safe") {
            mstore(signers, found)
        }
    }
}
