// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @title IVerifierRegistry
/// @notice Verifiers stake the payment token here to sit on dispute juries, for the models (checkpoint hashes) they
/// say they judge. Each model has its own sortition: a verifier adds selection weight `stake / minStake` to the
/// pool of each model it judges, and leaving a model or exiting removes it; Arbitration draws a dispute's jurors
/// from its task's model's pool (as it stood when each round opened), locks one seat stake per seat a juror
/// holds, and releases it when the dispute ends, less a penalty for an incoherent or silent juror (sent to the
/// escrow; a verifier's penalties never exceed its stake).
interface IVerifierRegistry {
    /// @notice `locked`: stake held by the seats the verifier sits on (jury seats are drawn whatever is locked, so
    /// it may exceed `stake`). Drawable while active (not exiting);
    /// `releaseAt` is when its stake can be withdrawn (0 while active).
    struct Verifier {
        uint128 stake;
        uint128 locked;
        uint64 registeredAtBlock;
        uint64 exitAtBlock;
        uint64 releaseAt;
    }

    error ZeroAddress();
    error ZeroAmount();
    error NotVerifier(address account);
    error VerifierAlreadyRegistered(address verifier);
    error VerifierStakeTooLow(uint256 stake, uint256 minimum);
    error VerifierExitAlreadyRequested(address verifier, uint256 releaseAt);
    error VerifierExitNotRequested(address verifier);
    error VerifierUnbondingNotFinished(uint256 releaseAt, uint256 nowTime);
    error VerifierStakeLocked(address verifier, uint256 locked);
    error UnbondingTooLong(uint256 period, uint256 maximum);
    error UnbondingTooShort(uint256 period, uint256 minimum);
    error TransferShortfall(uint256 expected, uint256 received);
    error NoModels();
    error ZeroModel();
    error TooManyModels(uint256 count, uint256 maximum);
    error AlreadyJudgingModel(address verifier, bytes32 model);
    error NotJudgingModel(address verifier, bytes32 model);

    event VerifierRegistered(address indexed verifier, uint256 stake, uint256 weight);
    event VerifierModelAdded(address indexed verifier, bytes32 indexed model, uint256 weight);
    event VerifierModelRemoved(address indexed verifier, bytes32 indexed model);
    event VerifierReweighed(address indexed verifier, bytes32 indexed model, uint256 weight);
    event VerifierExitRequested(address indexed verifier, uint256 releaseAt);
    event VerifierStakeWithdrawn(address indexed verifier, uint256 amount);
    event SeatLocked(address indexed verifier, uint256 amount);
    event SeatReleased(address indexed verifier, uint256 amount, uint256 penalty);
    event MinStakeChanged(uint256 minStake);
    event UnbondingPeriodChanged(uint256 period);

    /// @notice Stakes `stake` (at least `minStake`, approved to this contract) to judge `models` (1 to
    /// MAX_MODELS distinct non-zero checkpoint hashes): weight `stake / minStake` in every jury round of those
    /// models opened from this block on. An address registers once.
    function register(uint256 stake, bytes32[] calldata models) external;
    /// @notice Joins one more model's pool (an active verifier, below MAX_MODELS), with its stake's weight now.
    function addModel(bytes32 model) external;
    /// @notice Leaves a model's pool from this block on (rounds of it opened earlier may still draw it).
    function removeModel(bytes32 model) external;
    /// @notice Lowers `account`'s weight in each pool it is in to what its stake backs now, after penalties took
    /// part of the stake its weight was set with (anyone may call it; rounds opened from this block on see it).
    function reweigh(address account) external;
    /// @notice Leaves every round opened from this block on (its weight leaves every pool) and starts the
    /// unbonding period; seats already held stay.
    function requestExit() external;
    /// @notice After the unbonding period, once no seat holds it: returns the stake.
    function withdraw() external returns (uint256 amount);

    /// @notice Draws up to `seats` jury seats from `seed` over `model`'s pool as it stood at the end of block
    /// `atBlock` (the round's opening), the `parties`' registrations cut out: each seat lands on a verifier with
    /// probability its weight then / the weight drawn from, times its stake now / the stake it was weighed with
    /// (what penalties and withdrawals left). Seats other rounds locked play no part. Locks `seatStake` per seat
    /// (a verifier's locks may so exceed its stake); returns one account per seat drawn (fewer than `seats` when
    /// the draws run out). Arbiter only.
    function drawSeats(
        bytes32 model,
        uint256 seed,
        uint256 atBlock,
        uint256 seats,
        uint256 seatStake,
        address[] calldata parties
    ) external returns (address[] memory drawn);
    /// @notice Locks `amount` of `verifier`'s stake as an audit's deposit if it is active and has that much free
    /// (jury penalties never take it); returns whether it did. Arbiter only.
    function lockSeat(address verifier, uint256 amount) external returns (bool);
    /// @notice Releases `amount` of a jury seat's locked stake, taking `penalty` of it (at most `amount`, and at
    /// most the stake left beside the verifier's audit deposits) to the escrow; returns the penalty taken. Arbiter
    /// only.
    function releaseSeat(address verifier, uint256 amount, uint256 penalty) external returns (uint256 taken);
    /// @notice Releases an audit deposit `lockSeat` locked, taking `penalty` of it (at most `amount`) to the escrow;
    /// returns the penalty taken. Arbiter only.
    function releaseDeposit(address verifier, uint256 amount, uint256 penalty)
        external
        returns (uint256 taken);

    /// @notice A verifier's stake, locked seats and exit time.
    function verifierOf(address account) external view returns (Verifier memory);
    /// @notice Registered, with stake, and not exiting.
    function isVerifier(address account) external view returns (bool);
    /// @notice Whether `account` is an active verifier in `model`'s pool now.
    function judges(address account, bytes32 model) external view returns (bool);
    /// @notice The models `account` judges now.
    function modelsOf(address account) external view returns (bytes32[] memory);
    /// @notice Whether `reweigh(account)` would lower a weight: penalties left less stake than one of its pools'
    /// weights was set with.
    function needsReweigh(address account) external view returns (bool);
    /// @notice Sortition weight of `model`'s pool now (its seats of stake).
    function totalWeight(bytes32 model) external view returns (uint256);
    /// @notice Smallest stake, and the unit of weight: one seat.
    function minStake() external view returns (uint256);
    /// @notice The minimum stake in force at `time`: a task's disputes lock seats of the one in force when the
    /// task was created (a change reaches only tasks created after it).
    function minStakeAt(uint256 time) external view returns (uint256);
    /// @notice How long an exiting verifier waits before withdrawing its stake.
    function unbondingPeriod() external view returns (uint256);
}
