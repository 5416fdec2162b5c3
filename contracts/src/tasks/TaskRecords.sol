// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {ITaskRegistry} from "../interfaces/ITaskRegistry.sol";
import {TaskSettings} from "./TaskSettings.sol";

/// @title TaskRecords
/// @notice What the registry keeps of each task, and its views: only hashes, counters and per-miner entries, so
/// a task's storage is independent of the number of requests in its batch.
abstract contract TaskRecords is TaskSettings {
    uint256 private constant PER_MILLION = 1_000_000;

    /// @notice Number of tasks created so far; task ids start at 1.
    uint256 public taskCount;

    mapping(uint256 taskId => Task) internal _tasks;
    mapping(uint256 taskId => address[]) internal _miners;
    mapping(uint256 taskId => uint256[]) internal _minerAmounts;
    mapping(uint256 taskId => bytes32[]) internal _servedRoots;
    mapping(uint256 taskId => address[]) internal _signers;
    mapping(uint256 taskId => uint256) internal _signedMask;
    mapping(uint256 taskId => TaskTerms) internal _terms;
    mapping(uint256 taskId => TaskPrices) internal _prices;
    mapping(uint256 taskId => address) internal _coordinators;
    mapping(uint256 taskId => uint256) internal _openDisputes;
    mapping(uint256 taskId => uint256) internal _extensions;
    mapping(uint256 taskId => bytes32[]) internal _vouches;
    mapping(uint256 taskId => uint64) internal _releaseAt;
    mapping(uint256 taskId => uint256) internal _revokedMask;

    /// @inheritdoc ITaskRegistry
    function getTask(uint256 taskId) external view returns (Task memory) {
        return _tasks[taskId];
    }

    /// @inheritdoc ITaskRegistry
    function minersOf(uint256 taskId) external view returns (address[] memory) {
        return _miners[taskId];
    }

    /// @inheritdoc ITaskRegistry
    function minerAmountsOf(uint256 taskId) external view returns (uint256[] memory) {
        return _minerAmounts[taskId];
    }

    /// @inheritdoc ITaskRegistry
    function servedRootsOf(uint256 taskId) external view returns (bytes32[] memory) {
        return _servedRoots[taskId];
    }

    /// @inheritdoc ITaskRegistry
    function signersOf(uint256 taskId) external view returns (address[] memory) {
        return _signers[taskId];
    }

    /// @inheritdoc ITaskRegistry
    function signedMaskOf(uint256 taskId) external view returns (uint256) {
        return _signedMask[taskId];
    }

    /// @inheritdoc ITaskRegistry
    function revokedMaskOf(uint256 taskId) external view returns (uint256) {
        return _revokedMask[taskId];
    }

    /// @inheritdoc ITaskRegistry
    function vouchesOf(uint256 taskId) external view returns (bytes32[] memory) {
        return _vouches[taskId];
    }

    /// @inheritdoc ITaskRegistry
    function releaseAtOf(uint256 taskId) external view returns (uint256) {
        return _releaseAt[taskId];
    }

    /// @inheritdoc ITaskRegistry
    function challengeEndsAt(uint256 taskId) public view returns (uint256) {
        uint64 committedAt = _tasks[taskId].committedAt;
        return
            committedAt == 0 ? 0 : uint256(committedAt) + _terms[taskId].challengeWindow + _extensions[taskId];
    }

    /// @inheritdoc ITaskRegistry
    function pricesOf(uint256 taskId) external view returns (TaskPrices memory) {
        return _prices[taskId];
    }

    /// @inheritdoc ITaskRegistry
    function priceOf(uint256 taskId, uint64 inputTokens, uint64 outputTokens) public view returns (uint128) {
        TaskPrices storage prices = _prices[taskId];
        uint256 price =
            (uint256(inputTokens) * prices.inputPerMillion + uint256(outputTokens) * prices.outputPerMillion)
                / PER_MILLION;
        uint256 maxPrice = _tasks[taskId].maxPrice;
        return uint128(price < maxPrice ? price : maxPrice);
    }

    /// @inheritdoc ITaskRegistry
    function termsOf(uint256 taskId) external view returns (TaskTerms memory) {
        return _terms[taskId];
    }

    /// @inheritdoc ITaskRegistry
    function coordinatorOf(uint256 taskId) external view returns (address) {
        return _coordinators[taskId];
    }

    /// @inheritdoc ITaskRegistry
    function openDisputesOf(uint256 taskId) external view returns (uint256) {
        return _openDisputes[taskId];
    }

    /// @dev The task `taskId`; reverts if it was never created.
    function _existing(uint256 taskId) internal view returns (Task storage task) {
        task = _tasks[taskId];
        if (task.status == TaskStatus.None) revert UnknownTask(taskId);
    }

    function _requireStatus(uint256 taskId, Task storage task, TaskStatus expected) internal view {
        if (task.status != expected) revert WrongStatus(taskId, task.status, expected);
    }
}
