// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {ResultLeaf} from "../libraries/ResultLeaf.sol";

/// @title ITaskRegistry
/// @notice One task per batch of requests. Stores hashes and packed fields only, so gas per task does not depend
/// on how many requests the batch holds.
interface ITaskRegistry {
    /// @notice Task states, numbered so that every allowed transition increases the number.
    /// Open = validating, Assigned = in_progress, ResultsCommitted = finalizing (challenge window running),
    /// Disputed = a result leaf is under arbitration, Finalized = completed.
    enum TaskStatus {
        None,
        Open,
        Assigned,
        ResultsCommitted,
        Disputed,
        Finalized,
        Expired,
        Cancelled
    }

    struct Task {
        address owner;
        uint64 deadline;
        TaskStatus status;
        uint8 minerCount;
        uint128 maxPrice;
        uint64 committedAt;
        uint32 requestCount;
        bytes32 modelId;
        bytes32 inputRoot;
        bytes32 paramsHash;
        bytes32 resultsRoot;
        uint64 inputTokens;
        uint64 outputTokens;
        uint128 payment;
        uint128 stakeLock;
        uint128 fee;
    }

    struct CreateTaskParams {
        bytes32 modelId;
        bytes32 inputRoot;
        uint32 requestCount;
        bytes32 paramsHash;
        uint128 maxPrice;
        uint64 deadline;
        uint128 inputPricePerMillion;
        uint128 outputPricePerMillion;
    }

    /// @notice What the owner pays per million input and per million output tokens (token base units); the
    /// payment is the committed usage at these prices, rounded down and capped at the task's maximum price.
    struct TaskPrices {
        uint128 inputPerMillion;
        uint128 outputPerMillion;
    }

    /// @notice The settings new tasks take (the registry's constructor and admin setters).
    struct Config {
        uint256 challengeWindow;
        uint256 coordinatorFeeBps;
        address feeRecipient;
        uint256 minStakeLock;
        uint256 maxValueAtRisk;
    }

    /// @notice The registry's parameters in force when a task was created; they apply to it for its whole life.
    struct TaskTerms {
        uint64 createdAt;
        uint64 challengeWindow;
        uint16 coordinatorFeeBps;
        address feeRecipient;
        uint128 minStakeLock;
        uint128 maxValueAtRisk;
    }

    /// @notice A miner's consent to one task's stake lock: its registered signer's EIP-712 signature over
    /// `AcceptTask(taskId, miner, stakeLock, expiry)`, usable until `expiry`.
    struct Acceptance {
        uint64 expiry;
        bytes signature;
    }

    struct Commitment {
        bytes32 resultsRoot; // root of the positional Merkle sum tree over one leaf per request
        uint64 inputTokens; // the usage the tree adds up to; anyone can refute a wrong one with one leaf
        uint64 outputTokens;
        uint128 payment; // that usage at the task's prices, capped at its maximum price
        uint256[] minerAmounts; // one per assigned miner, in assignment order
        // One per assigned miner: the root of the tree over the leaves that miner served (zero if none), the
        // only leaves its signature vouches for and the only ones it can be slashed for.
        bytes32[] servedRoots;
    }

    error ZeroAddress();
    error ZeroValue();
    error InvalidDeadline(uint256 deadline, uint256 nowTime);
    error UnknownTask(uint256 taskId);
    error NotTaskOwner(uint256 taskId, address caller);
    error WrongStatus(uint256 taskId, TaskStatus actual, TaskStatus expected);
    error DeadlinePassed(uint256 taskId, uint256 deadline);
    error DeadlineNotPassed(uint256 taskId, uint256 deadline);
    error ChallengeWindowOpen(uint256 taskId, uint256 endsAt);
    error ChallengeWindowClosed(uint256 taskId, uint256 endedAt);
    error BadMinerCount(uint256 count, uint256 maximum);
    error DuplicateMiner(address miner);
    error MinerNotRegistered(address miner);
    error ModelNotSupported(address miner, bytes32 modelId);
    error StakeLockTooLow(uint256 stakeLock, uint256 minimum);
    error LengthMismatch(uint256 expected, uint256 actual);
    error PaymentMismatch(uint256 payment, uint256 expected);
    error SharesDoNotAddUp(uint256 minerTotal, uint256 expected);
    error InvalidSignature(address miner, address recovered);
    error FeeTooHigh(uint256 feeBps, uint256 maximum);
    error ChallengeWindowTooShort(uint256 window, uint256 minimum);
    error ValueAtRiskTooHigh(uint256 value, uint256 maximum);
    error LeafTaskMismatch(uint256 taskId, uint256 leafTaskId);
    error InvalidProof();
    error ProofTooLong(uint256 length, uint256 maximum);
    error PipelineTooLong(uint256 length, uint256 maximum);
    error NoAccountableMiner(uint256 taskId, uint256 requestIndex);
    error StakeLockTooHigh(uint256 stakeLock, uint256 maximum);
    error AcceptanceExpired(address miner, uint256 expiry);
    error NoConsent(address miner, address recovered);
    error UsageMatches(uint256 taskId);
    error NotTaskCoordinator(uint256 taskId, address caller);
    error UnpaidShareRequired(address miner);
    error NoMinerSigned(uint256 taskId);
    error NotAssignedMiner(uint256 taskId, address caller);
    error NotFullySigned(uint256 taskId, uint256 signedMask);
    error ReleaseNotDue(uint256 taskId, uint256 releaseAt);
    error TaskVouched(uint256 taskId);
    error VouchedOtherResults(address miner);
    error SignerRevoked(uint256 taskId, address signer);

    event TaskCreated(
        uint256 indexed taskId,
        address indexed owner,
        bytes32 indexed modelId,
        bytes32 inputRoot,
        uint32 requestCount,
        bytes32 paramsHash,
        uint128 maxPrice,
        uint64 deadline
    );
    event TaskCancelled(uint256 indexed taskId);
    event TaskAssigned(uint256 indexed taskId, address[] miners, uint128 stakeLock);
    event ResultsCommitted(
        uint256 indexed taskId,
        bytes32 resultsRoot,
        uint64 inputTokens,
        uint64 outputTokens,
        uint128 payment,
        uint128 fee,
        uint256[] minerAmounts
    );
    event ResultsVouched(uint256 indexed taskId, address indexed miner, bytes32 digest, bytes32 servedRoot);
    event ReleaseRequested(uint256 indexed taskId, uint256 releaseAt);
    event TaskSignerRevoked(uint256 indexed taskId, address indexed miner, address signer);
    event TaskDisputed(uint256 indexed taskId, uint256 openDisputes);
    event DisputeSettled(uint256 indexed taskId, uint256 openDisputes);
    event ChallengeExtended(uint256 indexed taskId, uint256 extension);
    event TaskFinalized(uint256 indexed taskId, uint128 payment, uint128 refund);
    event TaskRefunded(uint256 indexed taskId, uint256 slashed);
    event TaskExpired(uint256 indexed taskId);
    event UsageRefuted(uint256 indexed taskId, uint64 inputTokens, uint64 outputTokens, uint256 slashed);
    event ChallengeWindowChanged(uint256 window);
    event CoordinatorFeeChanged(uint256 feeBps, address feeRecipient);
    event MinStakeLockChanged(uint256 minStakeLock);
    event MaxValueAtRiskChanged(uint256 maxValueAtRisk);

    /// @notice Creates a task for an input root and escrows its maximum price from the caller.
    function createTask(CreateTaskParams calldata params) external returns (uint256 taskId);
    /// @notice The owner cancels a task not yet assigned and gets its whole escrow back.
    function cancelTask(uint256 taskId) external;
    /// @notice Gives up a task with no results, refunding the whole escrow to its owner and unlocking every
    /// assigned miner's stake: any coordinator while it is Open (at once: it lets a cancel made through the
    /// coordinator's API refund at once); its own coordinator while it is Assigned, only in the `RELEASE_NOTICE`
    /// that follows the notice of its `requestRelease`, and only if no miner vouched for results on-chain
    /// (`vouchResults`). Emits TaskCancelled.
    function releaseTask(uint256 taskId) external;
    /// @notice The coordinator that assigned the task announces that it will release it: `releaseTask` may give
    /// it up from `RELEASE_NOTICE` later, unless a miner vouches for results first. Emits ReleaseRequested.
    function requestRelease(uint256 taskId) external;
    /// @notice An assigned miner (or the signer it accepted the task with) vouches on-chain for `commitment`, as
    /// its signature would: for an Assigned task that its coordinator does not commit. A vouch stands in for the
    /// miner's signature in `commitResults` and stops the task from being released. Emits ResultsVouched.
    function vouchResults(uint256 taskId, Commitment calldata commitment) external;

    /// @notice An assigned miner (its own account, not its signer) revokes the signer it accepted an Assigned
    /// task with, whose key has leaked: from now on that key's signature is refused at commit and its on-chain
    /// vouch is too (a standing vouch is dropped: the miner's account may vouch again), so the miner is left
    /// out of the commitment (paid nothing, answering for nothing) unless its account vouches. The key stays a
    /// party of the task's disputes and audits. Emits TaskSignerRevoked.
    function revokeSigner(uint256 taskId) external;
    /// @notice Assigns the task to `miners`, locking `stakeLock` of each one's stake: only with each miner's
    /// acceptance of exactly this task and lock (`acceptances[i]` for `miners[i]`), and never more than the larger
    /// of the task's maximum price and the minimum stake lock.
    function assignTask(
        uint256 taskId,
        address[] calldata miners,
        uint128 stakeLock,
        Acceptance[] calldata acceptances
    ) external;
    /// @notice Commits the results root, usage and payment split, signed by the assigned miners: the task's
    /// coordinator with every signature it has (an unpaid miner's may be empty, unless that miner vouched for
    /// other results); anyone once every assigned miner signed or vouched on-chain for exactly this commitment.
    function commitResults(uint256 taskId, Commitment calldata commitment, bytes[] calldata signatures)
        external;
    /// @notice After the challenge window, pays the miners and the coordinator and refunds the unused budget.
    function finalizeTask(uint256 taskId) external;
    /// @notice Refunds a task whose deadline passed without a commitment, and unlocks its miners' stake.
    function expireTask(uint256 taskId) external;
    /// @notice Proves that the committed usage is not what the results tree adds up to: `leaf` at its position
    /// (`proof` in the results sum tree) yields the tree's true totals, and they differ from the committed ones.
    /// Each assigned miner whose signature the commitment carries signed those totals and loses its stake lock to
    /// the audit pool; the owner gets the whole escrow back (as an escrow balance); a miner committed without its
    /// signature signed nothing and is only unlocked. The locks go to no party, so that nobody profits from a
    /// refutation it arranged (a thief of a miner's signer key, as owner, signing false totals to refute them).
    /// Anyone may call it while the task is ResultsCommitted or Disputed.
    function refuteUsage(uint256 taskId, ResultLeaf.Leaf calldata leaf, bytes32[] calldata proof) external;

    /// @notice Freezes payment while one more dispute of the task runs: from ResultsCommitted inside the
    /// challenge window, or while the task is already Disputed (an audit runs and the owner disputes too).
    function markDisputed(uint256 taskId) external;
    /// @notice Ends one of the task's disputes. At fault: the pipeline's assigned miners are slashed and the
    /// owner refunded, whatever else is open (later resolutions of the same task then change nothing and return
    /// 0). Otherwise, once no dispute is left: the task settles now if `settle`, or goes back to ResultsCommitted
    /// to finalize at the end of its (extended) challenge window.
    function resolveDispute(uint256 taskId, bool minersAtFault, address[] calldata pipeline, bool settle)
        external
        returns (uint256 slashed);
    /// @notice Lengthens the task's challenge window by `extension` seconds (the time an audit ran).
    function extendChallenge(uint256 taskId, uint256 extension) external;

    /// @notice A task as stored: owner, roots, usage, payment, deadlines and status.
    function getTask(uint256 taskId) external view returns (Task memory);
    /// @notice The prices the task was created with.
    function pricesOf(uint256 taskId) external view returns (TaskPrices memory);
    /// @notice What `inputTokens` and `outputTokens` cost at the task's prices: rounded down, at most its maximum
    /// price. A commitment's payment must be exactly this for its usage.
    function priceOf(uint256 taskId, uint64 inputTokens, uint64 outputTokens) external view returns (uint128);
    /// @notice The miners assigned to a task, in the order their signatures and amounts follow.
    function minersOf(uint256 taskId) external view returns (address[] memory);
    /// @notice What each assigned miner is paid at finalization, as committed.
    function minerAmountsOf(uint256 taskId) external view returns (uint256[] memory);
    /// @notice The EIP-712 digest assigned miner `miner` signs: the whole commitment, every served root included,
    /// with the task's request count and assigned miners.
    function commitmentDigest(uint256 taskId, Commitment calldata commitment, address miner)
        external
        view
        returns (bytes32);
    /// @notice The EIP-712 digest `miner`'s signer signs to accept task `taskId` with a lock of `stakeLock` until
    /// `expiry`.
    function acceptanceDigest(uint256 taskId, address miner, uint128 stakeLock, uint64 expiry)
        external
        view
        returns (bytes32);
    /// @notice The served root each assigned miner signed, in assignment order.
    function servedRootsOf(uint256 taskId) external view returns (bytes32[] memory);
    /// @notice The signer each assigned miner had registered when it accepted the task, in assignment order: the
    /// key that signs the task's commitment and a party to its disputes and audits, whatever the miner's
    /// registered signer is later.
    function signersOf(uint256 taskId) external view returns (address[] memory);
    /// @notice Bit i set: assigned miner i signed the committed results (0 before the commit).
    function signedMaskOf(uint256 taskId) external view returns (uint256);
    /// @notice Per assigned miner, the commitment digest it vouched for on-chain (zero where it has not).
    function vouchesOf(uint256 taskId) external view returns (bytes32[] memory);
    /// @notice Bit i set: assigned miner i revoked the signer it accepted the task with (`revokeSigner`).
    function revokedMaskOf(uint256 taskId) external view returns (uint256);
    /// @notice When a requested release of the task may go through (0 when none was requested).
    function releaseAtOf(uint256 taskId) external view returns (uint256);
    /// @notice Checks that `leaf` is the committed result at its position (`proof` in the task's positional results
    /// sum tree of exactly `requestCount` leaves) and returns its hash and the miners of its pipeline that can be held to
    /// account for it: those assigned miners whose signed served root contains it (`servedProofs[k]` for the k-th
    /// pipeline entry). Reverts if no miner vouched for the leaf.
    function accountableFor(
        uint256 taskId,
        ResultLeaf.Leaf calldata leaf,
        bytes32[] calldata proof,
        bytes32[][] calldata servedProofs
    ) external view returns (bytes32 leafHash, address[] memory accountable);
    /// @notice The challenge window new tasks take, in seconds.
    function challengeWindow() external view returns (uint256);
    /// @notice Where the coordinator's fee is paid.
    function feeRecipient() external view returns (address);
    /// @notice End of the task's challenge window, extensions included; 0 before results are committed.
    function challengeEndsAt(uint256 taskId) external view returns (uint256);
    /// @notice The parameters the task was created under.
    function termsOf(uint256 taskId) external view returns (TaskTerms memory);
    /// @notice The coordinator account that assigned the task (it may not sit on the task's juries).
    function coordinatorOf(uint256 taskId) external view returns (address);
    /// @notice How many disputes of a task are still open.
    function openDisputesOf(uint256 taskId) external view returns (uint256);
}
