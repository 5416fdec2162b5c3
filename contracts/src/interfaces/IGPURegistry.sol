// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @title IGPURegistry
/// @notice Miner registrations and stakes. Stake is free (available), locked (backing an assigned task) or
/// unbonding (requested out, claimable after the unbonding period).
interface IGPURegistry {
    /// @notice What a miner declares about its machine when registering.
    struct MinerProfile {
        address signer; // key that signs result commitments (may differ from the operator)
        bytes32 gpuClass; // e.g. "H100-80GB", right-padded ASCII
        uint32 vramGb;
        uint16 gpuCount;
        bytes32 region; // e.g. "us-east-1"
        uint128 priceFloor; // minimum price per million tokens, token base units
        string endpoint; // where the coordinator reaches the miner
        bytes32[] modelIds;
    }

    /// @notice A miner's stake, in token base units.
    struct Stake {
        uint128 free;
        uint128 locked;
        uint128 unbonding;
        uint64 unbondingReleaseAt;
    }

    error ZeroAddress();
    error AlreadyRegistered(address miner);
    error NotRegistered(address miner);
    error StakeBelowMinimum(uint256 amount, uint256 minimum);
    error ZeroAmount();
    error InsufficientFreeStake(address miner, uint256 requested, uint256 available);
    error InsufficientLockedStake(address miner, uint256 requested, uint256 available);
    error NothingUnbonding(address miner);
    error UnbondingNotFinished(uint256 releaseAt, uint256 nowTime);
    error TooManyModels(uint256 count, uint256 maximum);
    error NoModels();
    error EndpointTooLong(uint256 length, uint256 maximum);
    error InvalidHardware();
    error UnbondingPeriodTooShort(uint256 period, uint256 minimum);
    error TransferShortfall(uint256 expected, uint256 received);

    event MinerRegistered(
        address indexed miner,
        address indexed signer,
        bytes32 gpuClass,
        uint32 vramGb,
        uint16 gpuCount,
        bytes32 region,
        uint128 priceFloor,
        string endpoint,
        bytes32[] modelIds,
        uint256 stake
    );
    event SignerChanged(address indexed miner, address indexed signer);
    event EndpointChanged(address indexed miner, string endpoint);
    event StakeAdded(address indexed miner, uint256 amount);
    event UnstakeRequested(address indexed miner, uint256 amount, uint256 releaseAt);
    event StakeWithdrawn(address indexed miner, uint256 amount);
    event StakeLocked(address indexed miner, uint256 amount);
    event StakeUnlocked(address indexed miner, uint256 amount);
    event StakeSlashed(address indexed miner, uint256 amount, address indexed to);
    event MinStakeChanged(uint256 minStake);
    event UnbondingPeriodChanged(uint256 period);

    /// @notice Registers the caller as a miner with its hardware, region, endpoint and models, staking
    /// `stakeAmount`.
    function register(MinerProfile calldata profile, uint256 stakeAmount) external;
    /// @notice Changes the address whose EIP-712 signatures count as the miner's.
    function setSigner(address signer) external;
    /// @notice Changes the endpoint the previous stage dials (at most MAX_ENDPOINT_BYTES; the format is checked
    /// off-chain, as at registration).
    function setEndpoint(string calldata endpoint) external;
    /// @notice Adds `amount` to the caller's free stake.
    function addStake(uint256 amount) external;
    /// @notice Moves `amount` of free stake into unbonding; it can be withdrawn after the unbonding period.
    function requestUnstake(uint256 amount) external;
    /// @notice Pays out the caller's stake whose unbonding has ended.
    function withdrawStake() external returns (uint256 amount);

    /// @notice The task registry locks `amount` of a miner's free stake behind a task it accepted.
    function lockStake(address miner, uint256 amount) external;
    /// @notice The task registry releases `amount` of a miner's locked stake.
    function unlockStake(address miner, uint256 amount) external;
    /// @notice Arbitration takes `amount` of a miner's locked stake and sends it to `to`.
    function slash(address miner, uint256 amount, address to) external;

    /// @notice Whether `miner` is registered.
    function isRegistered(address miner) external view returns (bool);
    /// @notice The address that signs for `miner`.
    function signerOf(address miner) external view returns (address);
    /// @notice A miner's stake: free, locked and unbonding, and when the unbonding ends.
    function stakeOf(address miner) external view returns (Stake memory);
    /// @notice A miner's registered profile: hardware, region, price floor, endpoint and models.
    function profileOf(address miner) external view returns (MinerProfile memory);
    /// @notice Whether `miner` registered the model `modelId` (the hash of its checkpoint).
    function supportsModel(address miner, bytes32 modelId) external view returns (bool);
    /// @notice The smallest stake accepted at registration (coordinators also ask it of a joining miner).
    function minStake() external view returns (uint256);
    /// @notice How long requested unstaking waits before it can be withdrawn.
    function unbondingPeriod() external view returns (uint256);
}
