// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {AccessControl} from "@openzeppelin/contracts/access/AccessControl.sol";
import {Pausable} from "@openzeppelin/contracts/utils/Pausable.sol";
import {EIP712} from "@openzeppelin/contracts/utils/cryptography/EIP712.sol";
import {ECDSA} from "@openzeppelin/contracts/utils/cryptography/ECDSA.sol";
import {MerkleProof} from "@openzeppelin/contracts/utils/cryptography/MerkleProof.sol";
import {SafeCast} from "@openzeppelin/contracts/utils/math/SafeCast.sol";
import {ITaskRegistry} from "./interfaces/ITaskRegistry.sol";
import {IGPURegistry} from "./interfaces/IGPURegistry.sol";
import {IPaymentEscrow} from "./interfaces/IPaymentEscrow.sol";
import {ResultLeaf} from "./libraries/ResultLeaf.sol";
import {PositionalMerkle} from "./libraries/PositionalMerkle.sol";

/// @title TaskRegistry
/// @notice The life of one batch task: created with its maximum price escrowed and its prices per million input
/// and output tokens, assigned to a set of miners (locking part of their stake), results committed as one
/// positional Merkle sum tree of exactly one leaf per request with the usage it adds up to and that usage's price,
/// each assigned miner signing it together with the root of the leaves it served itself (so a miner vouches for,
/// and can be slashed over, only what it served), a challenge window, then finalized into pull-payment balances.
/// A committed usage that is not the tree's sum is refuted with one leaf's proof. Gas per task is independent of
/// the number of requests in the batch: only hashes and counters are stored. The challenge window, fee, fee
/// recipient, minimum stake lock and value-at-risk cap in force when a task is created apply to it for its whole
/// life.
contract TaskRegistry is ITaskRegistry, AccessControl, Pausable, EIP712 {
    using SafeCast for uint256;

    /// @notice Role of the coordinator: assigns tasks and commits results.
    bytes32 public constant COORDINATOR_ROLE = keccak256("COORDINATOR_ROLE");
    /// @notice Role of the arbitration contract: freezes disputed tasks and settles them.
    bytes32 public constant ARBITER_ROLE = keccak256("ARBITER_ROLE");
    /// @notice Role allowed to pause task creation, assignment and commits.
    bytes32 public constant PAUSER_ROLE = keccak256("PAUSER_ROLE");

    /// @notice EIP-712 type of the message every assigned miner signs before results are committed.
    bytes32 public constant RESULT_COMMITMENT_TYPEHASH = keccak256(
        "ResultCommitment(uint256 taskId,bytes32 resultsRoot,uint64 inputTokens,uint64 outputTokens,uint128 payment,uint256[] minerAmounts,bytes32 servedRoot)"
    );

    /// @notice EIP-712 type of a miner's consent to one task's stake lock.
    bytes32 public constant ACCEPT_TASK_TYPEHASH =
        keccak256("AcceptTask(uint256 taskId,uint128 stakeLock,uint64 expiry)");

    uint256 public constant MAX_MINERS_PER_TASK = 32;
    uint256 public constant MAX_FEE_BPS = 2_000;
    uint256 public constant MAX_TASK_DURATION = 90 days;
    uint256 public constant MIN_CHALLENGE_WINDOW = 1 minutes;
    /// @notice Longest Merkle proof accepted (a tree of 2^64 leaves).
    uint256 public constant MAX_PROOF_LENGTH = 64;
    uint256 private constant BPS = 10_000;
    uint256 private constant PER_MILLION = 1_000_000;

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
    /// @notice Number of tasks created so far; task ids start at 1.
    uint256 public taskCount;
    /// @notice Most a task may put at stake in one dispute: its maximum price plus every miner's stake lock. The
    /// jury parameters are chosen so that corrupting a jury costs more than this (docs/security.md).
    uint256 public maxValueAtRisk;

    mapping(uint256 taskId => Task) private _tasks;
    mapping(uint256 taskId => address[]) private _miners;
    mapping(uint256 taskId => uint256[]) private _minerAmounts;
    mapping(uint256 taskId => bytes32[]) private _servedRoots;
    mapping(uint256 taskId => TaskTerms) private _terms;
    mapping(uint256 taskId => TaskPrices) private _prices;
    mapping(uint256 taskId => address) private _coordinators;
    mapping(uint256 taskId => uint256) private _openDisputes;
    mapping(uint256 taskId => uint256) private _extensions;

    struct Config {
        uint256 challengeWindow;
        uint256 coordinatorFeeBps;
        address feeRecipient;
        uint256 minStakeLock;
        uint256 maxValueAtRisk;
    }

    /// @param gpuRegistry_ Registry whose stakes back assignments.
    /// @param escrow_ Escrow that holds task payments.
    /// @param admin Receives the admin and pauser roles.
    /// @param config Initial challenge window, fee and minimum stake lock.
    constructor(IGPURegistry gpuRegistry_, IPaymentEscrow escrow_, address admin, Config memory config)
        EIP712("BatchMarket TaskRegistry", "1")
    {
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

    // ------------------------------------------------------------------------------------------ user actions

    /// @inheritdoc ITaskRegistry
    /// @dev The caller must have approved the escrow for `maxPrice`.
    function createTask(CreateTaskParams calldata p) external whenNotPaused returns (uint256 taskId) {
        if (p.inputRoot == bytes32(0) || p.modelId == bytes32(0) || p.requestCount == 0 || p.maxPrice == 0) {
            revert ZeroValue();
        }
        if (p.deadline <= block.timestamp || p.deadline > block.timestamp + MAX_TASK_DURATION) {
            revert InvalidDeadline(p.deadline, block.timestamp);
        }
        taskId = ++taskCount;
        Task storage task = _tasks[taskId];
        task.owner = msg.sender;
        task.deadline = p.deadline;
        task.status = TaskStatus.Open;
        task.maxPrice = p.maxPrice;
        task.requestCount = p.requestCount;
        task.modelId = p.modelId;
        task.inputRoot = p.inputRoot;
        task.paramsHash = p.paramsHash;
        _terms[taskId] = TaskTerms({
            createdAt: block.timestamp.toUint64(),
            challengeWindow: challengeWindow.toUint64(),
            coordinatorFeeBps: uint16(coordinatorFeeBps),
            feeRecipient: feeRecipient,
            minStakeLock: minStakeLock.toUint128(),
            maxValueAtRisk: maxValueAtRisk.toUint128()
        });
        _prices[taskId] = TaskPrices(p.inputPricePerMillion, p.outputPricePerMillion);
        escrow.depositEscrow(taskId, msg.sender, p.maxPrice);
        emit TaskCreated(
            taskId, msg.sender, p.modelId, p.inputRoot, p.requestCount, p.paramsHash, p.maxPrice, p.deadline
        );
    }

    /// @inheritdoc ITaskRegistry
    /// @dev Only before assignment; the whole escrow goes back to the owner's balance.
    function cancelTask(uint256 taskId) external {
        Task storage task = _existing(taskId);
        if (task.owner != msg.sender) revert NotTaskOwner(taskId, msg.sender);
        _requireStatus(taskId, task, TaskStatus.Open);
        task.status = TaskStatus.Cancelled;
        _refundAll(taskId, task.owner);
        emit TaskCancelled(taskId);
    }

    // ----------------------------------------------------------------------------------- coordinator actions

    /// @inheritdoc ITaskRegistry
    /// @dev Any coordinator may release an Open task (it only refunds its owner sooner than expiry would); an
    /// Assigned one only by the coordinator that assigned it, which alone knows that nothing was served.
    function releaseTask(uint256 taskId) external onlyRole(COORDINATOR_ROLE) {
        Task storage task = _existing(taskId);
        if (task.status == TaskStatus.Assigned) {
            if (_coordinators[taskId] != msg.sender) revert NotTaskCoordinator(taskId, msg.sender);
            _unlockAll(taskId, task.stakeLock);
        } else {
            _requireStatus(taskId, task, TaskStatus.Open);
        }
        task.status = TaskStatus.Cancelled;
        _refundAll(taskId, task.owner);
        emit TaskCancelled(taskId);
    }

    /// @inheritdoc ITaskRegistry
    /// @dev The lock lasts until the task settles, expires or loses a dispute; a miner consents to the task's
    /// deadline and terms when it signs, and no one can lock its stake without that signature.
    function assignTask(
        uint256 taskId,
        address[] calldata miners,
        uint128 stakeLock,
        Acceptance[] calldata acceptances
    ) external onlyRole(COORDINATOR_ROLE) whenNotPaused {
        Task storage task = _existing(taskId);
        _requireStatus(taskId, task, TaskStatus.Open);
        if (block.timestamp > task.deadline) revert DeadlinePassed(taskId, task.deadline);
        if (miners.length == 0 || miners.length > MAX_MINERS_PER_TASK) {
            revert BadMinerCount(miners.length, MAX_MINERS_PER_TASK);
        }
        if (acceptances.length != miners.length) revert LengthMismatch(miners.length, acceptances.length);
        TaskTerms storage terms = _terms[taskId];
        _checkStakeLock(task, terms, stakeLock, miners.length);
        for (uint256 i = 0; i < miners.length; ++i) {
            address miner = miners[i];
            for (uint256 j = 0; j < i; ++j) {
                if (miners[j] == miner) revert DuplicateMiner(miner);
            }
            if (!gpuRegistry.isRegistered(miner)) revert MinerNotRegistered(miner);
            if (!gpuRegistry.supportsModel(miner, task.modelId)) {
                revert ModelNotSupported(miner, task.modelId);
            }
            _checkConsent(taskId, miner, stakeLock, acceptances[i]);
            gpuRegistry.lockStake(miner, stakeLock);
        }
        _miners[taskId] = miners;
        _coordinators[taskId] = msg.sender;
        task.minerCount = uint8(miners.length);
        task.stakeLock = stakeLock;
        task.status = TaskStatus.Assigned;
        emit TaskAssigned(taskId, miners, stakeLock);
    }

    /// @inheritdoc ITaskRegistry
    /// @dev `signatures[i]` is the EIP-712 signature of assigned miner i's registered signer over the commitment.
    function commitResults(uint256 taskId, Commitment calldata c, bytes[] calldata signatures)
        external
        onlyRole(COORDINATOR_ROLE)
        whenNotPaused
    {
        Task storage task = _existing(taskId);
        _requireStatus(taskId, task, TaskStatus.Assigned);
        if (block.timestamp > task.deadline) revert DeadlinePassed(taskId, task.deadline);
        if (c.resultsRoot == bytes32(0)) revert ZeroValue();
        uint128 expected = priceOf(taskId, c.inputTokens, c.outputTokens);
        if (c.payment != expected) revert PaymentMismatch(c.payment, expected);
        uint128 fee = _checkShares(taskId, c);
        _checkSignatures(taskId, c, signatures);

        task.resultsRoot = c.resultsRoot;
        task.inputTokens = c.inputTokens;
        task.outputTokens = c.outputTokens;
        task.payment = c.payment;
        task.fee = fee;
        task.committedAt = block.timestamp.toUint64();
        task.status = TaskStatus.ResultsCommitted;
        _minerAmounts[taskId] = c.minerAmounts;
        _servedRoots[taskId] = c.servedRoots;
        emit ResultsCommitted(
            taskId, c.resultsRoot, c.inputTokens, c.outputTokens, c.payment, fee, c.minerAmounts
        );
    }

    /// @dev At least the task's minimum, at most the larger of its maximum price (what the miners can earn from
    /// it) and that minimum, and within the value-at-risk cap with every miner's lock.
    function _checkStakeLock(Task storage task, TaskTerms storage terms, uint128 stakeLock, uint256 count)
        private
        view
    {
        if (stakeLock < terms.minStakeLock) revert StakeLockTooLow(stakeLock, terms.minStakeLock);
        uint256 maxLock = task.maxPrice > terms.minStakeLock ? task.maxPrice : terms.minStakeLock;
        if (stakeLock > maxLock) revert StakeLockTooHigh(stakeLock, maxLock);
        uint256 valueAtRisk = uint256(task.maxPrice) + uint256(stakeLock) * count;
        if (valueAtRisk > terms.maxValueAtRisk) revert ValueAtRiskTooHigh(valueAtRisk, terms.maxValueAtRisk);
    }

    /// @dev The miner's registered signer must have accepted exactly this task and lock, and not too long ago.
    function _checkConsent(uint256 taskId, address miner, uint128 stakeLock, Acceptance calldata a)
        private
        view
    {
        if (block.timestamp > a.expiry) revert AcceptanceExpired(miner, a.expiry);
        bytes32 digest = acceptanceDigest(taskId, stakeLock, a.expiry);
        (address recovered, ECDSA.RecoverError err,) = ECDSA.tryRecover(digest, a.signature);
        if (err != ECDSA.RecoverError.NoError || recovered != gpuRegistry.signerOf(miner)) {
            revert NoConsent(miner, recovered);
        }
    }

    /// @dev One amount and one served root per assigned miner; the amounts must add up to the payment less the
    /// coordinator fee; returns the fee.
    function _checkShares(uint256 taskId, Commitment calldata c) private view returns (uint128 fee) {
        uint256 count = _miners[taskId].length;
        if (c.minerAmounts.length != count) revert LengthMismatch(count, c.minerAmounts.length);
        if (c.servedRoots.length != count) revert LengthMismatch(count, c.servedRoots.length);
        fee = (uint256(c.payment) * _terms[taskId].coordinatorFeeBps / BPS).toUint128();
        uint256 minerTotal;
        for (uint256 i = 0; i < count; ++i) {
            minerTotal += c.minerAmounts[i];
        }
        if (minerTotal != c.payment - fee) revert SharesDoNotAddUp(minerTotal, c.payment - fee);
    }

    /// @dev Every assigned miner's registered signer must have signed exactly this commitment with its own served
    /// root, except that an empty signature stands for a miner that is paid nothing and vouches for nothing (a
    /// spare that served no line, or a miner gone for good whose lines were served again by others). At least one
    /// miner must sign: no commitment stands on the coordinator's word alone.
    function _checkSignatures(uint256 taskId, Commitment calldata c, bytes[] calldata signatures)
        private
        view
    {
        address[] storage miners = _miners[taskId];
        uint256 count = miners.length;
        if (signatures.length != count) revert LengthMismatch(count, signatures.length);
        uint256 signed;
        for (uint256 i = 0; i < count; ++i) {
            if (signatures[i].length == 0) {
                if (c.minerAmounts[i] != 0 || c.servedRoots[i] != bytes32(0)) {
                    revert UnpaidShareRequired(miners[i]);
                }
                continue;
            }
            ++signed;
            bytes32 digest = commitmentDigest(taskId, c, c.servedRoots[i]);
            address expected = gpuRegistry.signerOf(miners[i]);
            (address recovered, ECDSA.RecoverError err,) = ECDSA.tryRecover(digest, signatures[i]);
            if (err != ECDSA.RecoverError.NoError || recovered != expected) {
                revert InvalidSignature(miners[i], recovered);
            }
        }
        if (signed == 0) revert NoMinerSigned(taskId);
    }

    // ------------------------------------------------------------------------------------ anyone's actions

    /// @inheritdoc ITaskRegistry
    /// @dev After the challenge window: pays miners and the coordinator, refunds the unused budget, unlocks stake.
    function finalizeTask(uint256 taskId) external {
        Task storage task = _existing(taskId);
        _requireStatus(taskId, task, TaskStatus.ResultsCommitted);
        uint256 endsAt = challengeEndsAt(taskId);
        if (block.timestamp < endsAt) revert ChallengeWindowOpen(taskId, endsAt);
        _settle(taskId, task);
    }

    /// @inheritdoc ITaskRegistry
    /// @dev An open or assigned task whose deadline passed without a commit refunds in full and unlocks stake.
    function expireTask(uint256 taskId) external {
        Task storage task = _existing(taskId);
        if (task.status != TaskStatus.Open && task.status != TaskStatus.Assigned) {
            revert WrongStatus(taskId, task.status, TaskStatus.Assigned);
        }
        if (block.timestamp <= task.deadline) revert DeadlineNotPassed(taskId, task.deadline);
        task.status = TaskStatus.Expired;
        _unlockAll(taskId, task.stakeLock);
        _refundAll(taskId, task.owner);
        emit TaskExpired(taskId);
    }

    /// @inheritdoc ITaskRegistry
    /// @dev A sum tree's nodes carry their usage, so every valid proof yields the true totals: a proof that
    /// verifies and yields other totals than the committed ones shows that every signer vouched for a false usage.
    function refuteUsage(uint256 taskId, ResultLeaf.Leaf calldata leaf, bytes32[] calldata proof) external {
        Task storage task = _existing(taskId);
        if (task.status != TaskStatus.ResultsCommitted && task.status != TaskStatus.Disputed) {
            revert WrongStatus(taskId, task.status, TaskStatus.ResultsCommitted);
        }
        (bytes32 root, uint64 inputTokens, uint64 outputTokens) =
            _resultsRootOf(taskId, task, leaf, ResultLeaf.hash(leaf), proof);
        if (root != task.resultsRoot) revert InvalidProof();
        if (inputTokens == task.inputTokens && outputTokens == task.outputTokens) {
            revert UsageMatches(taskId);
        }
        task.status = TaskStatus.Finalized;
        address[] storage miners = _miners[taskId];
        uint256 stakeLock = task.stakeLock;
        for (uint256 i = 0; i < miners.length; ++i) {
            gpuRegistry.slash(miners[i], stakeLock, address(escrow));
        }
        uint256 slashed = escrow.creditReceived(task.owner);
        _refundAll(taskId, task.owner);
        emit UsageRefuted(taskId, inputTokens, outputTokens, slashed);
    }

    // ------------------------------------------------------------------------------------ arbiter actions

    /// @inheritdoc ITaskRegistry
    function markDisputed(uint256 taskId) external onlyRole(ARBITER_ROLE) {
        Task storage task = _existing(taskId);
        if (task.status != TaskStatus.Disputed) {
            _requireStatus(taskId, task, TaskStatus.ResultsCommitted);
            uint256 endsAt = challengeEndsAt(taskId);
            if (block.timestamp >= endsAt) revert ChallengeWindowClosed(taskId, endsAt);
            task.status = TaskStatus.Disputed;
        }
        uint256 open = ++_openDisputes[taskId];
        emit TaskDisputed(taskId, open);
    }

    /// @inheritdoc ITaskRegistry
    function extendChallenge(uint256 taskId, uint256 extension) external onlyRole(ARBITER_ROLE) {
        _existing(taskId);
        _extensions[taskId] += extension;
        emit ChallengeExtended(taskId, _extensions[taskId]);
    }

    /// @inheritdoc ITaskRegistry
    /// @dev At fault: the owner gets the whole escrow back, the pipeline's assigned miners lose their task lock
    /// (sent to the escrow for arbitration to distribute), other miners are unlocked. Not at fault: the task
    /// settles as if finalized.
    function resolveDispute(uint256 taskId, bool minersAtFault, address[] calldata pipeline, bool settle)
        external
        onlyRole(ARBITER_ROLE)
        returns (uint256 slashed)
    {
        Task storage task = _existing(taskId);
        uint256 open = _openDisputes[taskId];
        if (open == 0) revert WrongStatus(taskId, task.status, TaskStatus.Disputed);
        _openDisputes[taskId] = --open;
        emit DisputeSettled(taskId, open);
        // An earlier dispute of this task found the miners at fault: everything is already settled.
        if (task.status != TaskStatus.Disputed) return 0;
        if (!minersAtFault) {
            if (open != 0) return 0;
            if (settle) _settle(taskId, task);
            else task.status = TaskStatus.ResultsCommitted;
            return 0;
        }
        task.status = TaskStatus.Finalized;
        address[] storage miners = _miners[taskId];
        uint256 stakeLock = task.stakeLock;
        for (uint256 i = 0; i < miners.length; ++i) {
            if (_contains(pipeline, miners[i])) {
                gpuRegistry.slash(miners[i], stakeLock, address(escrow));
                slashed += stakeLock;
            } else {
                gpuRegistry.unlockStake(miners[i], stakeLock);
            }
        }
        _refundAll(taskId, task.owner);
        emit TaskRefunded(taskId, slashed);
    }

    // ------------------------------------------------------------------------------------------------ admin

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

    // ------------------------------------------------------------------------------------------------ views

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

    /// @inheritdoc ITaskRegistry
    function acceptanceDigest(uint256 taskId, uint128 stakeLock, uint64 expiry)
        public
        view
        returns (bytes32)
    {
        return _hashTypedDataV4(keccak256(abi.encode(ACCEPT_TASK_TYPEHASH, taskId, stakeLock, expiry)));
    }

    /// @inheritdoc ITaskRegistry
    function servedRootsOf(uint256 taskId) external view returns (bytes32[] memory) {
        return _servedRoots[taskId];
    }

    /// @inheritdoc ITaskRegistry
    function commitmentDigest(uint256 taskId, Commitment calldata c, bytes32 servedRoot)
        public
        view
        returns (bytes32)
    {
        return _hashTypedDataV4(
            keccak256(
                abi.encode(
                    RESULT_COMMITMENT_TYPEHASH,
                    taskId,
                    c.resultsRoot,
                    c.inputTokens,
                    c.outputTokens,
                    c.payment,
                    keccak256(abi.encodePacked(c.minerAmounts)),
                    servedRoot
                )
            )
        );
    }

    /// @inheritdoc ITaskRegistry
    /// @dev A pipeline entry that is not an assigned miner, has no served root, repeats an earlier entry or whose
    /// served proof fails is left out: the coordinator writes pipelines, and only a miner's own signature binds it.
    function accountableFor(
        uint256 taskId,
        ResultLeaf.Leaf calldata leaf,
        bytes32[] calldata proof,
        bytes32[][] calldata servedProofs
    ) external view returns (bytes32 leafHash, address[] memory accountable) {
        Task storage task = _tasks[taskId];
        leafHash = ResultLeaf.hash(leaf);
        (bytes32 root,,) = _resultsRootOf(taskId, task, leaf, leafHash, proof);
        if (task.resultsRoot == bytes32(0) || root != task.resultsRoot) revert InvalidProof();
        uint256 length = leaf.pipeline.length;
        if (length > MAX_MINERS_PER_TASK) revert PipelineTooLong(length, MAX_MINERS_PER_TASK);
        if (servedProofs.length != length) revert LengthMismatch(length, servedProofs.length);

        address[] storage miners = _miners[taskId];
        bytes32[] storage served = _servedRoots[taskId];
        accountable = new address[](length);
        uint256 found;
        for (uint256 k = 0; k < length; ++k) {
            _checkProofLength(servedProofs[k].length);
            address miner = leaf.pipeline[k];
            for (uint256 i = 0; i < miners.length; ++i) {
                if (miners[i] != miner) continue;
                bytes32 servedRoot = served[i];
                if (
                    servedRoot != bytes32(0) && !_contains(accountable, miner)
                        && MerkleProof.verifyCalldata(servedProofs[k], servedRoot, leafHash)
                ) accountable[found++] = miner;
                break;
            }
        }
        if (found == 0) revert NoAccountableMiner(taskId, leaf.requestIndex);
        assembly ("memory-safe") {
            mstore(accountable, found)
        }
    }

    // --------------------------------------------------------------------------------------------- internal

    function _existing(uint256 taskId) private view returns (Task storage task) {
        task = _tasks[taskId];
        if (task.status == TaskStatus.None) revert UnknownTask(taskId);
    }

    function _requireStatus(uint256 taskId, Task storage task, TaskStatus expected) private view {
        if (task.status != expected) revert WrongStatus(taskId, task.status, expected);
    }

    /// @dev Pays the committed shares and fee, refunds the rest of the escrow, unlocks every miner.
    function _settle(uint256 taskId, Task storage task) private {
        task.status = TaskStatus.Finalized;
        address[] storage miners = _miners[taskId];
        uint256[] storage amounts = _minerAmounts[taskId];
        uint256 count = miners.length;
        address[] memory payees = new address[](count + 1);
        uint256[] memory payouts = new uint256[](count + 1);
        for (uint256 i = 0; i < count; ++i) {
            payees[i] = miners[i];
            payouts[i] = amounts[i];
        }
        payees[count] = _terms[taskId].feeRecipient;
        payouts[count] = task.fee;
        _unlockAll(taskId, task.stakeLock);
        escrow.settleEscrow(taskId, payees, payouts, task.owner);
        emit TaskFinalized(taskId, task.payment, task.maxPrice - task.payment);
    }

    function _refundAll(uint256 taskId, address owner) private {
        escrow.settleEscrow(taskId, new address[](0), new uint256[](0), owner);
    }

    function _unlockAll(uint256 taskId, uint256 stakeLock) private {
        address[] storage miners = _miners[taskId];
        for (uint256 i = 0; i < miners.length; ++i) {
            gpuRegistry.unlockStake(miners[i], stakeLock);
        }
    }

    /// @dev The results root and total usage that `leaf` at its position and `proof` imply (zero if they do not
    /// fit the task's tree); a results proof holds two words per level.
    function _resultsRootOf(
        uint256 taskId,
        Task storage task,
        ResultLeaf.Leaf calldata leaf,
        bytes32 leafHash,
        bytes32[] calldata proof
    ) private view returns (bytes32, uint64, uint64) {
        if (leaf.taskId != taskId) revert LeafTaskMismatch(taskId, leaf.taskId);
        _checkProofLength(proof.length / 2);
        return PositionalMerkle.rootOf(
            proof, leafHash, leaf.inputTokens, leaf.outputTokens, leaf.requestIndex, task.requestCount
        );
    }

    function _checkProofLength(uint256 length) private pure {
        if (length > MAX_PROOF_LENGTH) revert ProofTooLong(length, MAX_PROOF_LENGTH);
    }

    function _contains(address[] memory list, address item) private pure returns (bool) {
        for (uint256 i = 0; i < list.length; ++i) {
            if (list[i] == item) return true;
        }
        return false;
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
