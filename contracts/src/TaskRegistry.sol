// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {SafeCast} from "@openzeppelin/contracts/utils/math/SafeCast.sol";
import {ITaskRegistry} from "./interfaces/ITaskRegistry.sol";
import {IGPURegistry} from "./interfaces/IGPURegistry.sol";
import {IPaymentEscrow} from "./interfaces/IPaymentEscrow.sol";
import {AddressList} from "./libraries/AddressList.sol";
import {ResultLeaf} from "./libraries/ResultLeaf.sol";
import {TaskEvidence} from "./tasks/TaskEvidence.sol";
import {TaskSettings} from "./tasks/TaskSettings.sol";

/// @title TaskRegistry
/// @notice The life of one batch task: created with its maximum price escrowed and its prices per million input
/// and output tokens, assigned to a set of miners (locking part of their stake), results committed as one
/// positional Merkle sum tree of exactly one leaf per request with the usage it adds up to and that usage's price,
/// each assigned miner signing it together with the root of the leaves it served itself (so a miner vouches for,
/// and can be slashed over, only what it served), a challenge window, then finalized into pull-payment balances.
/// A committed usage that is not the tree's sum is refuted with one leaf's proof. Gas per task is independent of
/// the number of requests in the batch: only hashes and counters are stored. The challenge window, fee, fee
/// recipient, minimum stake lock and value-at-risk cap in force when a task is created apply to it for its whole
/// life. Its parts: `TaskSettings` (wiring, roles, settings), `TaskRecords` (what is kept of each task, and views)
/// and `TaskEvidence` (the signed messages and the proofs); this contract is the task's life over them.
contract TaskRegistry is TaskEvidence {
    using SafeCast for uint256;

    uint256 private constant BPS = 10_000;
    /// @notice How long an assigned task's announced release waits: time for miners that served and signed its
    /// results to vouch for them on-chain (which stops the release) when its coordinator withholds the commit.
    /// The release may then go through for as long again; past that the announcement is stale and a release
    /// needs a new one (so an announcement made early cannot wait, ripe, for the miners' signatures).
    uint256 public constant RELEASE_NOTICE = 1 hours;

    /// @param gpuRegistry_ Registry whose stakes back assignments.
    /// @param escrow_ Escrow that holds task payments.
    /// @param admin Receives the admin and pauser roles.
    /// @param config Initial challenge window, fee and minimum stake lock.
    constructor(IGPURegistry gpuRegistry_, IPaymentEscrow escrow_, address admin, Config memory config)
        TaskSettings(gpuRegistry_, escrow_, admin, config)
    {}

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
    /// Assigned one only by the coordinator that assigned it, after its notice, and never once a miner vouched:
    /// a coordinator and an owner that took the outputs cannot cancel the work the miners served and signed.
    function releaseTask(uint256 taskId) external onlyRole(COORDINATOR_ROLE) {
        Task storage task = _existing(taskId);
        if (task.status == TaskStatus.Assigned) {
            if (_coordinators[taskId] != msg.sender) revert NotTaskCoordinator(taskId, msg.sender);
            uint256 releaseAt = _releaseAt[taskId];
            if (
                releaseAt == 0 || block.timestamp < releaseAt || block.timestamp >= releaseAt + RELEASE_NOTICE
            ) {
                revert ReleaseNotDue(taskId, releaseAt);
            }
            if (_vouches[taskId].length != 0) revert TaskVouched(taskId);
            _unlockAll(taskId, task.stakeLock);
        } else {
            _requireStatus(taskId, task, TaskStatus.Open);
        }
        task.status = TaskStatus.Cancelled;
        _refundAll(taskId, task.owner);
        emit TaskCancelled(taskId);
    }

    /// @inheritdoc ITaskRegistry
    /// @dev A request repeated while the last one is not stale keeps that one's time.
    function requestRelease(uint256 taskId) external {
        Task storage task = _existing(taskId);
        _requireStatus(taskId, task, TaskStatus.Assigned);
        if (_coordinators[taskId] != msg.sender) revert NotTaskCoordinator(taskId, msg.sender);
        uint256 last = _releaseAt[taskId];
        if (last != 0 && block.timestamp < last + RELEASE_NOTICE) return;
        uint256 releaseAt = block.timestamp + RELEASE_NOTICE;
        _releaseAt[taskId] = releaseAt.toUint64();
        emit ReleaseRequested(taskId, releaseAt);
    }

    /// @inheritdoc ITaskRegistry
    /// @dev The vouch is the digest the miner's signature would sign; a later vouch replaces its earlier one.
    function vouchResults(uint256 taskId, Commitment calldata c) external {
        Task storage task = _existing(taskId);
        _requireStatus(taskId, task, TaskStatus.Assigned);
        address[] storage miners = _miners[taskId];
        uint256 count = miners.length;
        if (c.servedRoots.length != count) revert LengthMismatch(count, c.servedRoots.length);
        uint256 i = 0;
        while (i < count && miners[i] != msg.sender && _signers[taskId][i] != msg.sender) ++i;
        if (i == count) revert NotAssignedMiner(taskId, msg.sender);
        if (miners[i] != msg.sender && (_revokedMask[taskId] >> i) & 1 == 1) {
            revert SignerRevoked(taskId, msg.sender);
        }
        bytes32[] storage vouches = _vouches[taskId];
        if (vouches.length == 0) {
            for (uint256 k = 0; k < count; ++k) {
                vouches.push();
            }
        }
        bytes32 digest = commitmentDigest(taskId, c, miners[i]);
        vouches[i] = digest;
        emit ResultsVouched(taskId, miners[i], digest, c.servedRoots[i]);
    }

    /// @inheritdoc ITaskRegistry
    /// @dev Only while Assigned: a committed task's signatures are already checked, and who signed is final.
    function revokeSigner(uint256 taskId) external {
        Task storage task = _existing(taskId);
        _requireStatus(taskId, task, TaskStatus.Assigned);
        address[] storage miners = _miners[taskId];
        uint256 i = 0;
        while (i < miners.length && miners[i] != msg.sender) ++i;
        if (i == miners.length) revert NotAssignedMiner(taskId, msg.sender);
        _revokedMask[taskId] |= 1 << i;
        bytes32[] storage vouches = _vouches[taskId];
        if (vouches.length != 0) vouches[i] = bytes32(0); // it may be the thief's; the length still stops a release
        emit TaskSignerRevoked(taskId, msg.sender, _signers[taskId][i]);
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
            _signers[taskId].push(_checkConsent(taskId, miner, stakeLock, acceptances[i]));
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
    /// @dev `signatures[i]` is the EIP-712 signature of assigned miner i's registered signer over the commitment
    /// (empty where its on-chain vouch stands in). Anyone may commit what every miner signed: the miners of a
    /// task whose coordinator withholds the commit commit it themselves; only the task's own coordinator may
    /// leave an unpaid miner's slot empty.
    function commitResults(uint256 taskId, Commitment calldata c, bytes[] calldata signatures)
        external
        whenNotPaused
    {
        Task storage task = _existing(taskId);
        _requireStatus(taskId, task, TaskStatus.Assigned);
        if (block.timestamp > task.deadline) revert DeadlinePassed(taskId, task.deadline);
        if (c.resultsRoot == bytes32(0)) revert ZeroValue();
        uint128 expected = priceOf(taskId, c.inputTokens, c.outputTokens);
        if (c.payment != expected) revert PaymentMismatch(c.payment, expected);
        uint128 fee = _checkShares(taskId, c);
        uint256 signed = _checkSignatures(taskId, c, signatures);
        uint256 everyone = (1 << _miners[taskId].length) - 1;
        if (signed != everyone && _coordinators[taskId] != msg.sender) {
            revert NotFullySigned(taskId, signed);
        }
        _signedMask[taskId] = signed;

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
    /// Only signers are slashed: a miner committed without its signature never saw those totals.
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
        uint256 signed = _signedMask[taskId];
        for (uint256 i = 0; i < miners.length; ++i) {
            if (signed & (1 << i) != 0) gpuRegistry.slash(miners[i], stakeLock, address(escrow));
            else gpuRegistry.unlockStake(miners[i], stakeLock);
        }
        uint256 slashed = escrow.poolReceived(); // nobody's to cash: see ITaskRegistry.refuteUsage
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
            if (AddressList.contains(pipeline, miners[i])) {
                gpuRegistry.slash(miners[i], stakeLock, address(escrow));
                slashed += stakeLock;
            } else {
                gpuRegistry.unlockStake(miners[i], stakeLock);
            }
        }
        _refundAll(taskId, task.owner);
        emit TaskRefunded(taskId, slashed);
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
}
