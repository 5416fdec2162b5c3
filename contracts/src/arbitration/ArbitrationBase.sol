// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {AccessControl} from "@openzeppelin/contracts/access/AccessControl.sol";
import {SafeCast} from "@openzeppelin/contracts/utils/math/SafeCast.sol";
import {IArbitration} from "../interfaces/IArbitration.sol";
import {ITaskRegistry} from "../interfaces/ITaskRegistry.sol";
import {IGPURegistry} from "../interfaces/IGPURegistry.sol";
import {IPaymentEscrow} from "../interfaces/IPaymentEscrow.sol";
import {IVerifierRegistry} from "../interfaces/IVerifierRegistry.sol";
import {IRandomness} from "../interfaces/IRandomness.sol";
import {Versions} from "../libraries/Versions.sol";

/// @title ArbitrationBase
/// @notice What every part of arbitration shares: the contracts it is wired to, its configuration (every version
/// ever set, each task living under the one in force when it was created), and who counts as a party to a task.
/// The parts (juries, disputes) build on it; `Arbitration` puts them together.
abstract contract ArbitrationBase is IArbitration, AccessControl {
    using SafeCast for uint256;

    uint256 public constant MAX_ROUNDS = 3;
    uint256 public constant MAX_REWARD_BPS = 5_000;
    uint256 public constant MAX_NO_DECISION_FEE_BPS = 5_000;
    uint256 public constant MAX_BASE_JURY = 15;
    uint256 public constant MIN_PHASE = 1 minutes;
    /// @notice Shorter than the verifiers' least unbonding (VerifierRegistry.MIN_UNBONDING): a round's drawing phase
    /// lasts one phase, and a verifier it reads as staked must still be staked when it is drawn.
    uint256 public constant MAX_PHASE = 1 days;
    uint256 public constant MAX_AUDIT_RATE_BPS = 10_000;
    uint256 internal constant BPS = 10_000;

    ITaskRegistry public immutable taskRegistry;
    IGPURegistry public immutable gpuRegistry;
    IPaymentEscrow public immutable escrow;
    /// @notice The verifiers' stake and their weight in jury draws.
    IVerifierRegistry public immutable verifiers;
    /// @notice Where juries' seeds come from.
    IRandomness public immutable randomness;

    /// @dev Every configuration ever set, and the time from which each applies to newly created tasks.
    Config[] private _configs;
    uint64[] private _configSince;

    constructor(
        ITaskRegistry taskRegistry_,
        IGPURegistry gpuRegistry_,
        IPaymentEscrow escrow_,
        IVerifierRegistry verifiers_,
        IRandomness randomness_,
        address admin,
        Config memory initialConfig
    ) {
        if (
            address(taskRegistry_) == address(0) || address(gpuRegistry_) == address(0)
                || address(escrow_) == address(0) || address(verifiers_) == address(0)
                || address(randomness_) == address(0) || admin == address(0)
        ) revert ZeroAddress();
        taskRegistry = taskRegistry_;
        gpuRegistry = gpuRegistry_;
        escrow = escrow_;
        verifiers = verifiers_;
        randomness = randomness_;
        _grantRole(DEFAULT_ADMIN_ROLE, admin);
        _setConfig(initialConfig);
    }

    /// @notice Sets the configuration for tasks created from the next second on; every existing task keeps the
    /// one it was created under (and every open dispute the terms it opened with).
    function setConfig(Config calldata newConfig) external onlyRole(DEFAULT_ADMIN_ROLE) {
        _setConfig(newConfig);
    }

    /// @notice The configuration for tasks created from now on.
    function config() public view returns (Config memory) {
        return _configs[_configs.length - 1];
    }

    /// @inheritdoc IArbitration
    function configOf(uint256 taskId) external view returns (Config memory) {
        return _configFor(taskId);
    }

    /// @notice The bond a task owner posts to open a dispute, under the current configuration.
    function disputeBond() external view returns (uint256) {
        return config().disputeBond;
    }

    /// @dev The task's owner, the coordinator that assigned it, every assigned miner and the signer it accepted the
    /// task with (fixed at assignment: a signer changed later makes no one else a party), followed by `extra`
    /// empty slots for the caller to fill.
    function _taskParties(uint256 taskId, address owner, uint256 extra)
        internal
        view
        returns (address[] memory parties)
    {
        address[] memory miners = taskRegistry.minersOf(taskId);
        address[] memory signers = taskRegistry.signersOf(taskId);
        parties = new address[](2 + 2 * miners.length + extra);
        parties[0] = owner;
        parties[1] = taskRegistry.coordinatorOf(taskId);
        for (uint256 i = 0; i < miners.length; ++i) {
            parties[2 + 2 * i] = miners[i];
            parties[3 + 2 * i] = signers[i];
        }
    }

    /// @dev The latest configuration whose start is at or before the task's creation.
    function _configFor(uint256 taskId) internal view returns (Config storage) {
        return _configs[Versions.at(_configSince, taskRegistry.termsOf(taskId).createdAt)];
    }

    /// @dev Checks every bound, including that a miner's stake cannot finish unbonding while a dispute that could
    /// slash it may still open or run: the challenge window, plus an audit's longest run (which extends the
    /// owner's window), plus the owner's dispute's longest run.
    function _setConfig(Config memory c) private {
        if (c.disputeBond == 0) revert ZeroBond();
        if (c.votingPeriod < MIN_PHASE) revert PhaseTooShort(c.votingPeriod, MIN_PHASE);
        if (c.votingPeriod > MAX_PHASE) revert PhaseTooLong(c.votingPeriod, MAX_PHASE);
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
}
