// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {AccessControl} from "@openzeppelin/contracts/access/AccessControl.sol";
import {Pausable} from "@openzeppelin/contracts/utils/Pausable.sol";
import {ReentrancyGuard} from "@openzeppelin/contracts/utils/ReentrancyGuard.sol";
import {SafeCast} from "@openzeppelin/contracts/utils/math/SafeCast.sol";
import {IGPURegistry} from "./interfaces/IGPURegistry.sol";

/// @title GPURegistry
/// @notice Miners register their machines here and stake the payment token. The task registry locks part of a
/// miner's free stake while it serves a task; only the arbitration contract can slash locked stake.
/// Unstaking waits out an unbonding period.
contract GPURegistry is IGPURegistry, AccessControl, Pausable, ReentrancyGuard {
    using SafeERC20 for IERC20;
    using SafeCast for uint256;

    /// @notice Role of the task registry: locks and unlocks stake for tasks.
    bytes32 public constant TASK_MANAGER_ROLE = keccak256("TASK_MANAGER_ROLE");
    /// @notice Role of the task registry too: slashes locked stake, only when Arbitration resolves a dispute
    /// against the miners (TaskRegistry.resolveDispute is callable by Arbitration alone).
    bytes32 public constant SLASHER_ROLE = keccak256("SLASHER_ROLE");
    /// @notice Role allowed to pause registration and staking.
    bytes32 public constant PAUSER_ROLE = keccak256("PAUSER_ROLE");

    uint256 public constant MAX_MODELS = 16;
    uint256 public constant MAX_ENDPOINT_BYTES = 256;
    uint256 public constant MIN_UNBONDING_PERIOD = 1 hours;

    /// @notice The staking token.
    IERC20 public immutable token;
    /// @inheritdoc IGPURegistry
    uint256 public minStake;
    /// @inheritdoc IGPURegistry
    uint256 public unbondingPeriod;

    mapping(address miner => MinerProfile) private _profiles;
    mapping(address miner => Stake) private _stakes;

    /// @param token_ Staking token.
    /// @param admin Receives the admin and pauser roles.
    /// @param minStake_ Smallest stake accepted at registration, in token base units.
    /// @param unbondingPeriod_ Seconds between an unstake request and its withdrawal.
    constructor(IERC20 token_, address admin, uint256 minStake_, uint256 unbondingPeriod_) {
        if (address(token_) == address(0) || admin == address(0)) revert ZeroAddress();
        token = token_;
        _grantRole(DEFAULT_ADMIN_ROLE, admin);
        _grantRole(PAUSER_ROLE, admin);
        _setMinStake(minStake_);
        _setUnbondingPeriod(unbondingPeriod_);
    }

    // ----------------------------------------------------------------------------------------- miner actions

    /// @inheritdoc IGPURegistry
    function register(MinerProfile calldata profile, uint256 stakeAmount)
        external
        whenNotPaused
        nonReentrant
    {
        if (isRegistered(msg.sender)) revert AlreadyRegistered(msg.sender);
        if (profile.signer == address(0)) revert ZeroAddress();
        if (profile.vramGb == 0 || profile.gpuCount == 0 || profile.gpuClass == bytes32(0)) {
            revert InvalidHardware();
        }
        if (profile.modelIds.length == 0) revert NoModels();
        if (profile.modelIds.length > MAX_MODELS) revert TooManyModels(profile.modelIds.length, MAX_MODELS);
        _checkEndpoint(profile.endpoint);
        if (stakeAmount < minStake) revert StakeBelowMinimum(stakeAmount, minStake);

        _profiles[msg.sender] = profile;
        _stakes[msg.sender].free = stakeAmount.toUint128();
        _pull(stakeAmount);
        emit MinerRegistered(
            msg.sender,
            profile.signer,
            profile.gpuClass,
            profile.vramGb,
            profile.gpuCount,
            profile.region,
            profile.priceFloor,
            profile.endpoint,
            profile.modelIds,
            stakeAmount
        );
    }

    /// @inheritdoc IGPURegistry
    function setSigner(address signer) external {
        _requireRegistered(msg.sender);
        if (signer == address(0)) revert ZeroAddress();
        _profiles[msg.sender].signer = signer;
        emit SignerChanged(msg.sender, signer);
    }

    /// @inheritdoc IGPURegistry
    function setEndpoint(string calldata endpoint) external {
        _requireRegistered(msg.sender);
        _checkEndpoint(endpoint);
        _profiles[msg.sender].endpoint = endpoint;
        emit EndpointChanged(msg.sender, endpoint);
    }

    /// @inheritdoc IGPURegistry
    function addStake(uint256 amount) external whenNotPaused nonReentrant {
        _requireRegistered(msg.sender);
        if (amount == 0) revert ZeroAmount();
        Stake storage stake = _stakes[msg.sender];
        stake.free = (stake.free + amount).toUint128();
        _pull(amount);
        emit StakeAdded(msg.sender, amount);
    }

    /// @inheritdoc IGPURegistry
    /// @dev Restarts the unbonding clock for everything already unbonding.
    function requestUnstake(uint256 amount) external {
        _requireRegistered(msg.sender);
        if (amount == 0) revert ZeroAmount();
        Stake storage stake = _stakes[msg.sender];
        if (amount > stake.free) revert InsufficientFreeStake(msg.sender, amount, stake.free);
        stake.free -= amount.toUint128();
        stake.unbonding += amount.toUint128();
        uint256 releaseAt = block.timestamp + unbondingPeriod;
        stake.unbondingReleaseAt = releaseAt.toUint64();
        emit UnstakeRequested(msg.sender, amount, releaseAt);
    }

    /// @inheritdoc IGPURegistry
    function withdrawStake() external nonReentrant returns (uint256 amount) {
        Stake storage stake = _stakes[msg.sender];
        amount = stake.unbonding;
        if (amount == 0) revert NothingUnbonding(msg.sender);
        if (block.timestamp < stake.unbondingReleaseAt) {
            revert UnbondingNotFinished(stake.unbondingReleaseAt, block.timestamp);
        }
        stake.unbonding = 0;
        stake.unbondingReleaseAt = 0;
        token.safeTransfer(msg.sender, amount);
        emit StakeWithdrawn(msg.sender, amount);
    }

    // ------------------------------------------------------------------------------------ protocol actions

    /// @inheritdoc IGPURegistry
    function lockStake(address miner, uint256 amount) external onlyRole(TASK_MANAGER_ROLE) {
        _requireRegistered(miner);
        Stake storage stake = _stakes[miner];
        if (amount > stake.free) revert InsufficientFreeStake(miner, amount, stake.free);
        stake.free -= amount.toUint128();
        stake.locked += amount.toUint128();
        emit StakeLocked(miner, amount);
    }

    /// @inheritdoc IGPURegistry
    function unlockStake(address miner, uint256 amount) external onlyRole(TASK_MANAGER_ROLE) {
        Stake storage stake = _stakes[miner];
        if (amount > stake.locked) revert InsufficientLockedStake(miner, amount, stake.locked);
        stake.locked -= amount.toUint128();
        stake.free += amount.toUint128();
        emit StakeUnlocked(miner, amount);
    }

    /// @inheritdoc IGPURegistry
    /// @dev Only locked stake can be slashed, so a slash never exceeds what a task put at risk.
    function slash(address miner, uint256 amount, address to) external onlyRole(SLASHER_ROLE) nonReentrant {
        if (to == address(0)) revert ZeroAddress();
        Stake storage stake = _stakes[miner];
        if (amount > stake.locked) revert InsufficientLockedStake(miner, amount, stake.locked);
        stake.locked -= amount.toUint128();
        token.safeTransfer(to, amount);
        emit StakeSlashed(miner, amount, to);
    }

    // --------------------------------------------------------------------------------------------- admin

    /// @notice Sets the smallest stake accepted at registration.
    function setMinStake(uint256 minStake_) external onlyRole(DEFAULT_ADMIN_ROLE) {
        _setMinStake(minStake_);
    }

    /// @notice Sets the unbonding period for future unstake requests.
    function setUnbondingPeriod(uint256 period) external onlyRole(DEFAULT_ADMIN_ROLE) {
        _setUnbondingPeriod(period);
    }

    /// @notice Stops new registrations and stake top-ups. Unstaking and withdrawals keep working.
    function pause() external onlyRole(PAUSER_ROLE) {
        _pause();
    }

    /// @notice Lifts a pause.
    function unpause() external onlyRole(PAUSER_ROLE) {
        _unpause();
    }

    // --------------------------------------------------------------------------------------------- views

    /// @inheritdoc IGPURegistry
    function isRegistered(address miner) public view returns (bool) {
        return _profiles[miner].signer != address(0);
    }

    /// @inheritdoc IGPURegistry
    function signerOf(address miner) external view returns (address) {
        return _profiles[miner].signer;
    }

    /// @inheritdoc IGPURegistry
    function stakeOf(address miner) external view returns (Stake memory) {
        return _stakes[miner];
    }

    /// @inheritdoc IGPURegistry
    function profileOf(address miner) external view returns (MinerProfile memory) {
        return _profiles[miner];
    }

    /// @inheritdoc IGPURegistry
    function supportsModel(address miner, bytes32 modelId) external view returns (bool) {
        bytes32[] storage models = _profiles[miner].modelIds;
        for (uint256 i = 0; i < models.length; ++i) {
            // bounded by MAX_MODELS
            if (models[i] == modelId) return true;
        }
        return false;
    }

    // ------------------------------------------------------------------------------------------ internal

    /// @dev Pulls exactly `amount` from the caller: a token that delivers less (a fee on transfer) is refused,
    /// so recorded stake never exceeds what is held.
    function _pull(uint256 amount) private {
        uint256 before = token.balanceOf(address(this));
        token.safeTransferFrom(msg.sender, address(this), amount);
        uint256 received = token.balanceOf(address(this)) - before;
        if (received != amount) revert TransferShortfall(amount, received);
    }

    function _checkEndpoint(string calldata endpoint) private pure {
        if (bytes(endpoint).length > MAX_ENDPOINT_BYTES) {
            revert EndpointTooLong(bytes(endpoint).length, MAX_ENDPOINT_BYTES);
        }
    }

    function _requireRegistered(address miner) private view {
        if (!isRegistered(miner)) revert NotRegistered(miner);
    }

    function _setMinStake(uint256 minStake_) private {
        if (minStake_ == 0) revert ZeroAmount();
        minStake = minStake_;
        emit MinStakeChanged(minStake_);
    }

    function _setUnbondingPeriod(uint256 period) private {
        if (period < MIN_UNBONDING_PERIOD) revert UnbondingPeriodTooShort(period, MIN_UNBONDING_PERIOD);
        unbondingPeriod = period;
        emit UnbondingPeriodChanged(period);
    }
}
