// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {AccessControl} from "@openzeppelin/contracts/access/AccessControl.sol";
import {Pausable} from "@openzeppelin/contracts/utils/Pausable.sol";
import {SafeCast} from "@openzeppelin/contracts/utils/math/SafeCast.sol";
import {ITaskRegistry} from "../interfaces/ITaskRegistry.sol";
import {IGPURegistry} from "../interfaces/IGPURegistry.sol";
import {IPaymentEscrow} from "../interfaces/IPaymentEscrow.sol";

/// @title TaskSettings
/// @notice What the task registry is wired to, who may do what, and the settings new tasks take: challenge
/// window, coordinator fee and its recipient, minimum stake lock and value-at-risk cap. A task copies them when
/// it is created and keeps them for its whole life; the admin (through the timelock) changes them for new tasks.
abstract contract TaskSettings is ITaskRegistry, AccessControl, Pausable {
    using SafeCast for uint256;

    /// @notice Role of the coordinator: assigns tasks and commits results.
    bytes32 public constant COORDINATOR_ROLE = keccak256("COORDINATOR_ROLE");
    /// @notice Role of the arbitration contract: freezes disputed tasks and settles them.
    bytes32 public constant ARBITER_ROLE = keccak256("ARBITER_ROLE");
    /// @notice Role allowed to pause task creation, assignment and commits.
    bytes32 public constant PAUSER_ROLE = keccak256("PAUSER_ROLE");

    uint256 public constant MAX_MINERS_PER_TASK = 32;
    uint256 public constant MAX_FEE_BPS = 2_000;
    uint256 public constant MAX_TASK_DURATION = 90 days;
    uint256 public constant MIN_CHALLENGE_WINDOW = 1 minutes;

    IGPURegistry public immutable gpuRegistry;
    IPaymentEscrow public immutable escrow;

    /// @inheritdoc ITaskRegistry
    uint256 public challengeWindow;
    /// @notice Share of each payment that goes to the coordinator, in basis points.
    uint256 public coordinatorFeeBps;
    /// @inheritdoc ITaskRegistry
    address public feeRecipient;
    /// @notice Smallest stake the coordinator may lock per miner per task.
    uint256 public minStakeLock;
    /// @notice Most a task may put at stake in one dispute: its maximum price plus every miner's stake lock. The
    /// jury parameters are chosen so that corrupting a jury costs more than this (docs/security.md).
    uint256 public maxValueAtRisk;

    /// @param gpuRegistry_ Registry whose stakes back assignments.
    /// @param escrow_ Escrow that holds task payments.
    /// @param admin Receives the admin and pauser roles.
    /// @param config Initial challenge window, fee and minimum stake lock.
    constructor(IGPURegistry gpuRegistry_, IPaymentEscrow escrow_, address admin, Config memory config) {
        if (address(gpuRegistry_) == address(0) || address(escrow_) == address(0) || admin == address(0)) {
            revert ZeroAddress();
        }
        gpuRegistry = gpuRegistry_;
        escrow = escrow_;
        _grantRole(DEFAULT_ADMIN_ROLE, admin);
        _grantRole(PAUSER_ROLE, admin);
        _setChallengeWindow(config.challengeWindow);
        _setCoordinatorFee(config.coordinatorFeeBps, config.feeRecipient);
        _setMinStakeLock(config.minStakeLock);
        _setMaxValueAtRisk(config.maxValueAtRisk);
    }

    /// @notice The admin (through the timelock) sets the challenge window of tasks created from now on.
    function setChallengeWindow(uint256 window) external onlyRole(DEFAULT_ADMIN_ROLE) {
        _setChallengeWindow(window);
    }

    /// @notice The admin (through the timelock) sets the coordinator's fee and where it is paid, for new
    /// tasks.
    function setCoordinatorFee(uint256 feeBps, address recipient) external onlyRole(DEFAULT_ADMIN_ROLE) {
        _setCoordinatorFee(feeBps, recipient);
    }

    /// @notice The admin (through the timelock) sets the least stake a task locks per miner, for new tasks.
    function setMinStakeLock(uint256 amount) external onlyRole(DEFAULT_ADMIN_ROLE) {
        _setMinStakeLock(amount);
    }

    /// @notice The admin (through the timelock) caps what one dispute can move, for new tasks.
    function setMaxValueAtRisk(uint256 amount) external onlyRole(DEFAULT_ADMIN_ROLE) {
        _setMaxValueAtRisk(amount);
    }

    /// @notice Stops task creation, assignment and commits. Cancelling, expiring, finalizing, disputes and
    /// withdrawals keep working, so no one's money is trapped by a pause.
    function pause() external onlyRole(PAUSER_ROLE) {
        _pause();
    }

    /// @notice The admin lets new tasks be created again.
    function unpause() external onlyRole(PAUSER_ROLE) {
        _unpause();
    }

    function _setChallengeWindow(uint256 window) private {
        if (window < MIN_CHALLENGE_WINDOW) revert ChallengeWindowTooShort(window, MIN_CHALLENGE_WINDOW);
        challengeWindow = window;
        emit ChallengeWindowChanged(window);
    }

    function _setCoordinatorFee(uint256 feeBps, address recipient) private {
        if (feeBps > MAX_FEE_BPS) revert FeeTooHigh(feeBps, MAX_FEE_BPS);
        if (recipient == address(0)) revert ZeroAddress();
        coordinatorFeeBps = feeBps;
        feeRecipient = recipient;
        emit CoordinatorFeeChanged(feeBps, recipient);
    }

    function _setMinStakeLock(uint256 amount) private {
        minStakeLock = amount;
        emit MinStakeLockChanged(amount);
    }

    function _setMaxValueAtRisk(uint256 amount) private {
        if (amount == 0) revert ZeroValue();
        maxValueAtRisk = amount.toUint128(); // tasks keep it in 128 bits
        emit MaxValueAtRiskChanged(amount);
    }
}
