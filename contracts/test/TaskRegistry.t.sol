// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {ECDSA} from "@openzeppelin/contracts/utils/cryptography/ECDSA.sol";
import {IERC20Errors} from "@openzeppelin/contracts/interfaces/draft-IERC6093.sol";
import {Pausable} from "@openzeppelin/contracts/utils/Pausable.sol";
import {BaseTest} from "./BaseTest.sol";
import {TaskRegistry} from "../src/TaskRegistry.sol";
import {ITaskRegistry as IT} from "../src/interfaces/ITaskRegistry.sol";
import {IGPURegistry} from "../src/interfaces/IGPURegistry.sol";
import {IPaymentEscrow} from "../src/interfaces/IPaymentEscrow.sol";

contract TaskRegistryTest is BaseTest {
    uint256 internal constant SECP256K1_N =
        0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141;
    bytes32 internal constant ROOT = keccak256("results root");
    IT.TaskStatus internal constant OPEN = IT.TaskStatus.Open;
    IT.TaskStatus internal constant ASSIGNED = IT.TaskStatus.Assigned;
    IT.TaskStatus internal constant COMMITTED = IT.TaskStatus.ResultsCommitted;
    IT.TaskStatus internal constant DISPUTED = IT.TaskStatus.Disputed;
    IT.TaskStatus internal constant FINALIZED = IT.TaskStatus.Finalized;

    function setUp() public override {
        super.setUp();
        _registerAll();
    }

    function _config() internal view returns (IT.Config memory) {
        return IT.Config(CHALLENGE_WINDOW, FEE_BPS, feeRecipient, MIN_STAKE_LOCK, MAX_VALUE_AT_RISK);
    }

    function _pause() internal {
        vm.prank(admin);
        tasks.pause();
    }

    function _committed() internal returns (uint256 id) {
        id = _assignedTask(alice, 3);
        _commit(id, _commitment(ROOT, PAYMENT, 3));
    }

    function _err(bytes4 selector, uint256 a, uint256 b) internal pure returns (bytes memory) {
        return abi.encodeWithSelector(selector, a, b);
    }

    // ---- constructor

    function test_constructor_setsConfig() public {
        vm.expectEmit();
        emit IT.ChallengeWindowChanged(CHALLENGE_WINDOW);
        vm.expectEmit();
        emit IT.CoordinatorFeeChanged(FEE_BPS, feeRecipient);
        vm.expectEmit();
        emit IT.MinStakeLockChanged(MIN_STAKE_LOCK);
        TaskRegistry t = new TaskRegistry(registry, escrow, bob, _config());
        assertTrue(t.hasRole(0x00, bob));
        assertTrue(t.hasRole(t.PAUSER_ROLE(), bob));
        assertEq(address(t.gpuRegistry()), address(registry));
        assertEq(address(t.escrow()), address(escrow));
        assertEq(t.challengeWindow(), CHALLENGE_WINDOW);
        assertEq(t.coordinatorFeeBps(), FEE_BPS);
        assertEq(t.feeRecipient(), feeRecipient);
        assertEq(t.minStakeLock(), MIN_STAKE_LOCK);
    }

    function test_constructor_reverts() public {
        IT.Config memory c = _config();
        vm.expectRevert(IT.ZeroAddress.selector);
        new TaskRegistry(IGPURegistry(address(0)), escrow, admin, c);
        vm.expectRevert(IT.ZeroAddress.selector);
        new TaskRegistry(registry, IPaymentEscrow(address(0)), admin, c);
        vm.expectRevert(IT.ZeroAddress.selector);
        new TaskRegistry(registry, escrow, address(0), c);
        c.feeRecipient = address(0);
        vm.expectRevert(IT.ZeroAddress.selector);
        new TaskRegistry(registry, escrow, admin, c);
        c = _config();
        c.challengeWindow = 59;
        vm.expectRevert(_err(IT.ChallengeWindowTooShort.selector, 59, 60));
        new TaskRegistry(registry, escrow, admin, c);
        c = _config();
        c.coordinatorFeeBps = 2_001;
        vm.expectRevert(_err(IT.FeeTooHigh.selector, 2_001, 2_000));
        new TaskRegistry(registry, escrow, admin, c);
    }

    // ---- createTask

    function test_createTask_storesTaskAndEscrowsMaxPrice() public {
        IT.CreateTaskParams memory p = _taskParams(MAX_PRICE);
        _fund(alice, address(escrow), MAX_PRICE);

        vm.expectEmit(address(escrow));
        emit IPaymentEscrow.EscrowDeposited(1, alice, MAX_PRICE);
        vm.expectEmit(address(tasks));
        emit IT.TaskCreated(1, alice, MODEL, INPUT_ROOT, REQUESTS, PARAMS_HASH, MAX_PRICE, p.deadline);
        vm.prank(alice);
        assertEq(tasks.createTask(p), 1);

        IT.Task memory t = tasks.getTask(1);
        assertEq(t.owner, alice);
        assertEq(t.deadline, p.deadline);
        assertEq(uint8(t.status), uint8(OPEN));
        assertEq(t.minerCount, 0);
        assertEq(t.maxPrice, MAX_PRICE);
        assertEq(t.committedAt, 0);
        assertEq(t.requestCount, REQUESTS);
        assertEq(t.modelId, MODEL);
        assertEq(t.inputRoot, INPUT_ROOT);
        assertEq(t.paramsHash, PARAMS_HASH);
        assertEq(t.resultsRoot, bytes32(0));
        assertEq(t.payment + t.stakeLock + t.fee, 0);
        assertEq(tasks.taskCount(), 1);
        assertEq(tasks.challengeEndsAt(1), 0);
        assertEq(escrow.escrowOf(1), MAX_PRICE);
        assertEq(token.balanceOf(alice), 0);
        assertEq(token.balanceOf(address(escrow)), MAX_PRICE);
        assertEq(_createTask(bob, 1), 2, "ids increase");
    }

    function _expectCreateRevert(IT.CreateTaskParams memory p, bytes memory err) internal {
        _fund(alice, address(escrow), p.maxPrice);
        vm.prank(alice);
        vm.expectRevert(err);
        tasks.createTask(p);
    }

    function test_createTask_revertsOnZeroFields() public {
        bytes memory err = abi.encodeWithSelector(IT.ZeroValue.selector);
        IT.CreateTaskParams memory p = _taskParams(MAX_PRICE);
        p.inputRoot = 0;
        _expectCreateRevert(p, err);
        p = _taskParams(MAX_PRICE);
        p.modelId = 0;
        _expectCreateRevert(p, err);
        p = _taskParams(MAX_PRICE);
        p.requestCount = 0;
        _expectCreateRevert(p, err);
        _expectCreateRevert(_taskParams(0), err);
        // paramsHash may be zero (default sampling parameters).
        p = _taskParams(MAX_PRICE);
        p.paramsHash = 0;
        _fund(alice, address(escrow), MAX_PRICE);
        vm.prank(alice);
        tasks.createTask(p);
    }

    function test_createTask_deadlineBounds() public {
        uint256 nowTs = block.timestamp;
        IT.CreateTaskParams memory p = _taskParams(MAX_PRICE);
        uint64[3] memory bad = [T0 - 1, T0, T0 + 90 days + 1];
        for (uint256 i = 0; i < 3; ++i) {
            p.deadline = bad[i];
            _expectCreateRevert(p, _err(IT.InvalidDeadline.selector, bad[i], nowTs));
        }
        p.deadline = T0 + 90 days;
        _fund(alice, address(escrow), MAX_PRICE);
        vm.prank(alice);
        assertEq(tasks.getTask(tasks.createTask(p)).deadline, nowTs + 90 days);
    }

    function test_createTask_revertsWithoutAllowance() public {
        _mint(alice, MAX_PRICE);
        vm.prank(alice);
        vm.expectRevert(
            abi.encodeWithSelector(
                IERC20Errors.ERC20InsufficientAllowance.selector, address(escrow), 0, MAX_PRICE
            )
        );
        tasks.createTask(_taskParams(MAX_PRICE));
    }

    function test_createTask_revertsWhenPaused() public {
        _pause();
        _expectCreateRevert(_taskParams(MAX_PRICE), abi.encodeWithSelector(Pausable.EnforcedPause.selector));
    }

    // ---- cancelTask

    function test_cancelTask_refundsEverything() public {
        uint256 id = _createTask(alice, MAX_PRICE);
        vm.expectEmit(address(escrow));
        emit IPaymentEscrow.Credited(alice, MAX_PRICE);
        vm.expectEmit(address(escrow));
        emit IPaymentEscrow.EscrowSettled(id, 0, alice, MAX_PRICE);
        vm.expectEmit(address(tasks));
        emit IT.TaskCancelled(id);
        vm.prank(alice);
        tasks.cancelTask(id);

        assertEq(uint8(_status(id)), uint8(IT.TaskStatus.Cancelled));
        assertEq(escrow.escrowOf(id), 0);
        assertEq(escrow.balanceOf(alice), MAX_PRICE);
        _assertEscrowSolvent();
    }

    function test_cancelTask_reverts() public {
        vm.prank(alice);
        vm.expectRevert(abi.encodeWithSelector(IT.UnknownTask.selector, 7));
        tasks.cancelTask(7);

        uint256 id = _createTask(alice, MAX_PRICE);
        vm.prank(bob);
        vm.expectRevert(abi.encodeWithSelector(IT.NotTaskOwner.selector, id, bob));
        tasks.cancelTask(id);

        uint256 assigned = _assignedTask(alice, 1);
        vm.prank(alice);
        vm.expectRevert(_wrongStatus(assigned, ASSIGNED, OPEN));
        tasks.cancelTask(assigned);

        vm.prank(alice);
        tasks.cancelTask(id);
        vm.prank(alice);
        vm.expectRevert(_wrongStatus(id, IT.TaskStatus.Cancelled, OPEN));
        tasks.cancelTask(id);
        assertEq(escrow.balanceOf(alice), MAX_PRICE, "refunded once");
    }

    function test_cancelTask_worksWhilePaused() public {
        uint256 id = _createTask(alice, MAX_PRICE);
        _pause();
        vm.prank(alice);
        tasks.cancelTask(id);
        assertEq(escrow.balanceOf(alice), MAX_PRICE);
    }

    // ---- releaseTask

    function test_releaseTask_refundsAnOpenTask() public {
        uint256 id = _createTask(alice, MAX_PRICE);
        vm.expectEmit(address(escrow));
        emit IPaymentEscrow.EscrowSettled(id, 0, alice, MAX_PRICE);
        vm.expectEmit(address(tasks));
        emit IT.TaskCancelled(id);
        vm.prank(coordinator);
        tasks.releaseTask(id);
        assertEq(uint8(_status(id)), uint8(IT.TaskStatus.Cancelled));
        assertEq(escrow.escrowOf(id), 0);
        assertEq(escrow.balanceOf(alice), MAX_PRICE);
        _assertEscrowSolvent();
    }

    function test_releaseTask_refundsAndUnlocksAnAssignedTask() public {
        uint256 id = _assignedTask(alice, 2);
        _noticeRelease(id);
        vm.expectEmit(address(registry));
        emit IGPURegistry.StakeUnlocked(miners[0], MIN_STAKE_LOCK);
        vm.expectEmit(address(registry));
        emit IGPURegistry.StakeUnlocked(miners[1], MIN_STAKE_LOCK);
        vm.expectEmit(address(escrow));
        emit IPaymentEscrow.EscrowSettled(id, 0, alice, MAX_PRICE);
        vm.expectEmit(address(tasks));
        emit IT.TaskCancelled(id);
        vm.prank(coordinator);
        tasks.releaseTask(id);
        assertEq(uint8(_status(id)), uint8(IT.TaskStatus.Cancelled));
        assertEq(escrow.balanceOf(alice), MAX_PRICE);
        for (uint256 i = 0; i < 2; ++i) {
            assertEq(_free(miners[i]), MINER_STAKE);
            assertEq(_locked(miners[i]), 0);
            assertEq(escrow.balanceOf(miners[i]), 0);
        }
        _assertEscrowSolvent();
    }

    /// @dev Requests the release of task `id` and waits out the notice.
    function _noticeRelease(uint256 id) internal {
        vm.prank(coordinator);
        tasks.requestRelease(id);
        skip(tasks.RELEASE_NOTICE());
    }

    /// @dev Neither the owner, a stranger nor another coordinator can release an assigned task, nor its own
    /// coordinator before the notice it gave has passed; no task is released twice, and a committed one is out of
    /// reach.
    function test_releaseTask_reverts() public {
        uint256 id = _assignedTask(alice, 1);
        vm.prank(coordinator);
        vm.expectRevert(_err(IT.ReleaseNotDue.selector, id, 0));
        tasks.releaseTask(id);
        vm.expectEmit(address(tasks));
        emit IT.ReleaseRequested(id, block.timestamp + tasks.RELEASE_NOTICE());
        vm.prank(coordinator);
        tasks.requestRelease(id);
        uint256 due = block.timestamp + tasks.RELEASE_NOTICE();
        skip(tasks.RELEASE_NOTICE() - 1);
        vm.prank(coordinator);
        tasks.requestRelease(id); // a repeated request keeps the first one's time
        assertEq(tasks.releaseAtOf(id), due);
        vm.prank(coordinator);
        vm.expectRevert(_err(IT.ReleaseNotDue.selector, id, due));
        tasks.releaseTask(id);
        skip(1);
        bytes32 role = tasks.COORDINATOR_ROLE();
        vm.prank(alice);
        vm.expectRevert(_unauthorized(alice, role));
        tasks.releaseTask(id);
        address rival = makeAddr("rival coordinator");
        vm.prank(governor);
        tasks.grantRole(role, rival);
        vm.prank(rival);
        vm.expectRevert(abi.encodeWithSelector(IT.NotTaskCoordinator.selector, id, rival));
        tasks.releaseTask(id);

        vm.prank(coordinator);
        tasks.releaseTask(id);
        vm.prank(coordinator);
        vm.expectRevert(_wrongStatus(id, IT.TaskStatus.Cancelled, OPEN));
        tasks.releaseTask(id);
        assertEq(escrow.balanceOf(alice), MAX_PRICE, "refunded once");

        uint256 committed = _committed();
        vm.prank(coordinator);
        vm.expectRevert(_wrongStatus(committed, COMMITTED, OPEN));
        tasks.releaseTask(committed);
        vm.prank(coordinator);
        vm.expectRevert(abi.encodeWithSelector(IT.UnknownTask.selector, 99));
        tasks.releaseTask(99);
    }

    // ---- assignTask

    function test_assignTask_locksStakeAndRecordsMiners() public {
        uint256 id = _createTask(alice, MAX_PRICE);
        address[] memory list = _miners(3);
        for (uint256 i = 0; i < 3; ++i) {
            vm.expectEmit(address(registry));
            emit IGPURegistry.StakeLocked(list[i], 25e6);
        }
        vm.expectEmit(address(tasks));
        emit IT.TaskAssigned(id, list, 25e6);
        vm.prank(coordinator);
        tasks.assignTask(id, list, 25e6, _acceptances(tasks, id, list, 25e6));

        IT.Task memory t = tasks.getTask(id);
        assertEq(uint8(t.status), uint8(ASSIGNED));
        assertEq(t.minerCount, 3);
        assertEq(t.stakeLock, 25e6);
        assertEq(tasks.minersOf(id), list);
        for (uint256 i = 0; i < 3; ++i) {
            assertEq(_free(list[i]), MINER_STAKE - 25e6);
            assertEq(_locked(list[i]), 25e6);
        }
        assertEq(_locked(miners[3]), 0);
    }

    function test_assignTask_atDeadline() public {
        uint256 id = _createTask(alice, MAX_PRICE);
        vm.warp(tasks.getTask(id).deadline);
        _assign(id, _miners(1));
        assertEq(uint8(_status(id)), uint8(ASSIGNED));
    }

    function test_assignTask_acceptsMaximumMinerCount() public {
        uint256 id = _createTask(alice, MAX_PRICE);
        address[] memory list = new address[](32);
        for (uint256 i = 0; i < 32; ++i) {
            list[i] = vm.addr(0x1000 + i);
            extraSignerKeys[list[i]] = 0x1000 + i;
            _fund(list[i], address(registry), MIN_STAKE);
            vm.prank(list[i]);
            registry.register(_profile(list[i]), MIN_STAKE);
        }
        _assign(id, list);
        assertEq(tasks.getTask(id).minerCount, 32);
        assertEq(_locked(list[31]), MIN_STAKE_LOCK);
    }

    function _expectAssignRevert(uint256 id, address[] memory list, uint128 lock, bytes memory err) internal {
        vm.prank(coordinator);
        vm.expectRevert(err);
        tasks.assignTask(id, list, lock, _acceptances(tasks, id, list, lock));
    }

    function test_assignTask_reverts() public {
        uint256 id = _createTask(alice, MAX_PRICE);
        address[] memory one = _miners(1);
        bytes memory err = _unauthorized(alice, tasks.COORDINATOR_ROLE());
        vm.prank(alice);
        vm.expectRevert(err);
        tasks.assignTask(id, one, STAKE_LOCK, _acceptances(tasks, id, one, STAKE_LOCK));

        _expectAssignRevert(3, one, STAKE_LOCK, abi.encodeWithSelector(IT.UnknownTask.selector, 3));
        _expectAssignRevert(id, new address[](0), STAKE_LOCK, _err(IT.BadMinerCount.selector, 0, 32));
        _expectAssignRevert(id, new address[](33), STAKE_LOCK, _err(IT.BadMinerCount.selector, 33, 32));
        _expectAssignRevert(
            id, one, STAKE_LOCK - 1, _err(IT.StakeLockTooLow.selector, STAKE_LOCK - 1, STAKE_LOCK)
        );

        address[] memory list = _miners(3);
        list[2] = list[0];
        _expectAssignRevert(id, list, STAKE_LOCK, abi.encodeWithSelector(IT.DuplicateMiner.selector, list[0]));
        list[2] = stranger;
        _expectAssignRevert(
            id, list, STAKE_LOCK, abi.encodeWithSelector(IT.MinerNotRegistered.selector, stranger)
        );

        // One miner short of free stake: the whole assignment reverts.
        vm.prank(miners[1]);
        registry.requestUnstake(MINER_STAKE - 1);
        _expectAssignRevert(
            id,
            _miners(2),
            STAKE_LOCK,
            abi.encodeWithSelector(IGPURegistry.InsufficientFreeStake.selector, miners[1], STAKE_LOCK, 1)
        );
        assertEq(_locked(miners[0]), 0);

        uint64 deadline = tasks.getTask(id).deadline;
        vm.warp(uint256(deadline) + 1);
        _expectAssignRevert(id, one, STAKE_LOCK, _err(IT.DeadlinePassed.selector, id, deadline));
    }

    function test_assignTask_revertsUnlessOpen() public {
        uint256 id = _assignedTask(alice, 1);
        _expectAssignRevert(id, _miners(1), STAKE_LOCK, _wrongStatus(id, ASSIGNED, OPEN));
        uint256 cancelled = _createTask(alice, MAX_PRICE);
        vm.prank(alice);
        tasks.cancelTask(cancelled);
        _expectAssignRevert(
            cancelled, _miners(1), STAKE_LOCK, _wrongStatus(cancelled, IT.TaskStatus.Cancelled, OPEN)
        );
    }

    function test_assignTask_revertsOnUnsupportedModel() public {
        IT.CreateTaskParams memory p = _taskParams(MAX_PRICE);
        p.modelId = UNSUPPORTED_MODEL;
        _fund(alice, address(escrow), MAX_PRICE);
        vm.prank(alice);
        uint256 id = tasks.createTask(p);
        _expectAssignRevert(
            id,
            _miners(1),
            STAKE_LOCK,
            abi.encodeWithSelector(IT.ModelNotSupported.selector, miners[0], UNSUPPORTED_MODEL)
        );
    }

    function test_assignTask_revertsWhenPaused() public {
        uint256 id = _createTask(alice, MAX_PRICE);
        _pause();
        _expectAssignRevert(
            id, _miners(1), STAKE_LOCK, abi.encodeWithSelector(Pausable.EnforcedPause.selector)
        );
    }

    // ---- commitResults

    function test_commitResults_storesCommitment() public {
        uint256 id = _assignedTask(alice, 3);
        IT.Commitment memory c = _commitment(ROOT, PAYMENT, 3);
        bytes[] memory sigs = _signatures(id, c);
        assertEq(c.minerAmounts[0], 24_629_631);
        assertEq(c.minerAmounts[1], 24_629_629);

        vm.expectEmit(address(tasks));
        emit IT.ResultsCommitted(id, ROOT, INPUT_TOKENS, OUTPUT_TOKENS, PAYMENT, 3_888_888, c.minerAmounts);
        vm.prank(coordinator);
        tasks.commitResults(id, c, sigs);

        IT.Task memory t = tasks.getTask(id);
        assertEq(uint8(t.status), uint8(COMMITTED));
        assertEq(t.resultsRoot, ROOT);
        assertEq(t.inputTokens, INPUT_TOKENS);
        assertEq(t.outputTokens, OUTPUT_TOKENS);
        assertEq(t.payment, PAYMENT);
        assertEq(t.fee, 3_888_888);
        assertEq(t.committedAt, block.timestamp);
        assertEq(tasks.minerAmountsOf(id), c.minerAmounts);
        assertEq(tasks.challengeEndsAt(id), block.timestamp + CHALLENGE_WINDOW);
        assertEq(escrow.escrowOf(id), MAX_PRICE, "nothing moves before finalization");
    }

    function test_commitResults_edgeAmountsAndDeadline() public {
        uint256 id = _assignedTask(alice, 2);
        vm.warp(tasks.getTask(id).deadline);
        _commit(id, _commitment(ROOT, 0, 2));
        assertEq(tasks.getTask(id).payment + tasks.getTask(id).fee, 0);

        id = _assignedTask(alice, 2);
        _commit(id, _commitment(ROOT, MAX_PRICE, 2));
        assertEq(tasks.getTask(id).fee, 5e6);

        // A usage that costs more than the maximum price is paid the maximum price.
        id = _assignedTask(alice, 2);
        IT.Commitment memory capped = _commitment(ROOT, MAX_PRICE, 2);
        capped.outputTokens = type(uint64).max;
        capped.inputTokens = type(uint64).max;
        _commit(id, capped);
        assertEq(tasks.getTask(id).payment, MAX_PRICE);
    }

    function test_commitmentDigest_matchesEip712Spec() public {
        uint256 id = _assignedTask(alice, 3);
        IT.Commitment memory c = _commitment(ROOT, PAYMENT, 3);
        assertEq(tasks.commitmentDigest(id, c, miners[0]), _digest(id, c, miners[0]));
        assertTrue(tasks.commitmentDigest(id + 1, c, miners[0]) != _digest(id, c, miners[0]));
        assertTrue(tasks.commitmentDigest(id, c, miners[1]) != _digest(id, c, miners[0]), "names the miner");
        assertEq(tasks.RESULT_COMMITMENT_TYPEHASH(), COMMITMENT_TYPEHASH);
        bytes32 before = _digest(id, c, miners[0]);
        c.servedRoots[2] = keccak256("served by miner 2");
        assertEq(tasks.commitmentDigest(id, c, miners[0]), _digest(id, c, miners[0]));
        assertTrue(_digest(id, c, miners[0]) != before, "covers every miner's served root");
    }

    /// @dev A miner's signature names it and covers every served root: moved to another miner's slot, or with any
    /// miner's root changed after signing, it no longer verifies (a co-signer cannot swap in another served root).
    function test_commitResults_bindsEachSignatureToItsMinerAndEveryServedRoot() public {
        uint256 id = _assignedTask(alice, 2);
        IT.Commitment memory c = _commitment(ROOT, PAYMENT, 2);
        c.servedRoots[0] = keccak256("served by miner 0");
        c.servedRoots[1] = keccak256("served by miner 1");
        bytes[] memory sigs = _signatures(id, c);
        c.servedRoots[1] = keccak256("another root for miner 1");
        sigs[1] = _signatures(id, c)[1]; // miner 1 signs its new root; miner 0 never saw it
        _expectCommitRevert(
            id, c, sigs, _invalidSig(miners[0], _recovered(sigs[0], _digest(id, c, miners[0])))
        );
        c.servedRoots[1] = keccak256("served by miner 1");
        sigs = _signatures(id, c);
        (sigs[0], sigs[1]) = (sigs[1], sigs[0]);
        _expectCommitRevert(
            id, c, sigs, _invalidSig(miners[0], _recovered(sigs[0], _digest(id, c, miners[0])))
        );
        sigs = _signatures(id, c);
        vm.prank(coordinator);
        tasks.commitResults(id, c, sigs);
        assertEq(tasks.servedRootsOf(id), c.servedRoots);
    }

    function test_commitResults_needsOneServedRootPerMiner() public {
        uint256 id = _assignedTask(alice, 2);
        IT.Commitment memory c = _commitment(ROOT, PAYMENT, 2);
        c.servedRoots = new bytes32[](1);
        _expectCommitRevert(
            id, c, _signatures(id, c), abi.encodeWithSelector(IT.LengthMismatch.selector, 2, 1)
        );
    }

    function _expectCommitRevert(uint256 id, IT.Commitment memory c, bytes[] memory sigs, bytes memory err)
        internal
    {
        vm.prank(coordinator);
        vm.expectRevert(err);
        tasks.commitResults(id, c, sigs);
    }

    function test_commitResults_reverts() public {
        uint256 id = _assignedTask(alice, 2);
        IT.Commitment memory c = _commitment(ROOT, PAYMENT, 2);
        bytes[] memory sigs = _signatures(id, c);
        // Only a coordinator commits with a signature left empty (a miner paid nothing): anyone else needs all.
        IT.Commitment memory oneSigned = _commitment(ROOT, PAYMENT, 1);
        oneSigned.minerAmounts = new uint256[](2);
        oneSigned.minerAmounts[0] = PAYMENT - _fee(PAYMENT);
        oneSigned.servedRoots = new bytes32[](2);
        bytes[] memory one = new bytes[](2);
        one[0] = _signDigest(_keyOf(miners[0]), _digest(id, oneSigned, miners[0]));
        vm.prank(miners[0]);
        vm.expectRevert(_err(IT.NotFullySigned.selector, id, 1));
        tasks.commitResults(id, oneSigned, one);

        _expectCommitRevert(5, c, sigs, abi.encodeWithSelector(IT.UnknownTask.selector, 5));
        _expectCommitRevert(id, c, new bytes[](1), _err(IT.LengthMismatch.selector, 2, 1));
        IT.Commitment memory bad = _commitment(bytes32(0), PAYMENT, 2);
        _expectCommitRevert(id, bad, _signatures(id, bad), abi.encodeWithSelector(IT.ZeroValue.selector));
        bad = _commitment(ROOT, PAYMENT, 2);
        bad.payment += 100; // more than the committed usage costs at the task's prices
        bad.minerAmounts[0] += 100;
        _expectCommitRevert(id, bad, sigs, _err(IT.PaymentMismatch.selector, PAYMENT + 100, PAYMENT));
        bad.outputTokens = 2e6; // costs 200 tokens, twice the maximum price: the payment is capped there
        bad.payment = 2 * MAX_PRICE;
        _expectCommitRevert(id, bad, sigs, _err(IT.PaymentMismatch.selector, 2 * MAX_PRICE, MAX_PRICE));
        bad = _commitment(ROOT, PAYMENT, 3);
        _expectCommitRevert(id, bad, sigs, _err(IT.LengthMismatch.selector, 2, 3));

        uint256 expected = PAYMENT - 3_888_888;
        c.minerAmounts[1] += 1;
        _expectCommitRevert(id, c, sigs, _err(IT.SharesDoNotAddUp.selector, expected + 1, expected));
        c.minerAmounts[1] -= 2; // the coordinator cannot pocket rounding dust either
        _expectCommitRevert(id, c, sigs, _err(IT.SharesDoNotAddUp.selector, expected - 1, expected));

        c.minerAmounts[1] += 1;
        uint64 deadline = tasks.getTask(id).deadline;
        vm.warp(uint256(deadline) + 1);
        _expectCommitRevert(id, c, sigs, _err(IT.DeadlinePassed.selector, id, deadline));
    }

    function test_commitResults_revertsUnlessAssigned() public {
        uint256 open = _createTask(alice, MAX_PRICE);
        _expectCommitRevert(
            open, _commitment(ROOT, PAYMENT, 0), new bytes[](0), _wrongStatus(open, OPEN, ASSIGNED)
        );
        uint256 id = _committed();
        IT.Commitment memory c = _commitment(ROOT, PAYMENT, 3);
        _expectCommitRevert(id, c, _signatures(id, c), _wrongStatus(id, COMMITTED, ASSIGNED));
    }

    function test_commitResults_revertsWhenPaused() public {
        uint256 id = _assignedTask(alice, 1);
        IT.Commitment memory c = _commitment(ROOT, PAYMENT, 1);
        bytes[] memory sigs = _signatures(id, c);
        _pause();
        _expectCommitRevert(id, c, sigs, abi.encodeWithSelector(Pausable.EnforcedPause.selector));
    }

    /// @dev Who `sig` recovers to over `digest` (a signature over another digest recovers some other address).
    function _recovered(bytes memory sig, bytes32 digest) internal pure returns (address) {
        return ECDSA.recover(digest, sig);
    }

    function _invalidSig(address miner, address recovered) internal pure returns (bytes memory) {
        return abi.encodeWithSelector(IT.InvalidSignature.selector, miner, recovered);
    }

    function test_commitResults_rejectsWrongSigners() public {
        uint256 id = _assignedTask(alice, 2);
        IT.Commitment memory c = _commitment(ROOT, PAYMENT, 2);
        bytes[] memory sigs = _signatures(id, c);
        (sigs[0], sigs[1]) = (sigs[1], sigs[0]);
        _expectCommitRevert(
            id, c, sigs, _invalidSig(miners[0], _recovered(sigs[0], _digest(id, c, miners[0])))
        );
        sigs = _signatures(id, c);
        sigs[1] = _signDigest(signerKeys[3], _digest(id, c, miners[1]));
        _expectCommitRevert(id, c, sigs, _invalidSig(miners[1], _signer(3)));
    }

    /// @dev A signature over other numbers, another task or another chain recovers some other address.
    function test_commitResults_rejectsSignaturesOverOtherMessages() public {
        uint256 id = _assignedTask(alice, 1);
        uint256 other = _assignedTask(alice, 1);
        IT.Commitment memory c = _commitment(ROOT, PAYMENT, 1);
        IT.Commitment memory altered = _commitment(ROOT, PAYMENT, 1);
        altered.resultsRoot = keccak256("another root"); // changed after the miner signed
        (uint8 v, bytes32 r, bytes32 s) = vm.sign(signerKeys[0], _digest(id, c, miners[0]));
        bytes[] memory sigs = new bytes[](1);
        sigs[0] = abi.encodePacked(r, s, v);

        _expectCommitRevert(
            id, altered, sigs, _invalidSig(miners[0], ecrecover(_digest(id, altered, miners[0]), v, r, s))
        );
        _expectCommitRevert(
            other, c, sigs, _invalidSig(miners[0], ecrecover(_digest(other, c, miners[0]), v, r, s))
        );
        vm.chainId(block.chainid + 1);
        _expectCommitRevert(
            id, c, sigs, _invalidSig(miners[0], ecrecover(_digest(id, c, miners[0]), v, r, s))
        );
    }

    function test_commitResults_rejectsMalformedSignatures() public {
        uint256 id = _assignedTask(alice, 1);
        IT.Commitment memory c = _commitment(ROOT, PAYMENT, 1);
        bytes[] memory sigs = new bytes[](1);
        sigs[0] = new bytes(64);
        _expectCommitRevert(id, c, sigs, _invalidSig(miners[0], address(0)));
        sigs[0] = new bytes(65);
        _expectCommitRevert(id, c, sigs, _invalidSig(miners[0], address(0)));
        // Same key, high s: plain ecrecover accepts it, the contract does not.
        (uint8 v, bytes32 r, bytes32 s) = vm.sign(signerKeys[0], _digest(id, c, miners[0]));
        sigs[0] = abi.encodePacked(r, bytes32(SECP256K1_N - uint256(s)), v == 27 ? uint8(28) : uint8(27));
        _expectCommitRevert(id, c, sigs, _invalidSig(miners[0], address(0)));
    }

    /// @dev The commitment is signed by the signer each miner accepted the task with, whatever it registers later.
    function test_commitResults_keepsTheAcceptingSigner() public {
        uint256 id = _assignedTask(alice, 1);
        IT.Commitment memory c = _commitment(ROOT, PAYMENT, 1);
        bytes[] memory sigs = _signatures(id, c);
        (address newSigner, uint256 newKey) = makeAddrAndKey("new signer");
        vm.prank(miners[0]);
        registry.setSigner(newSigner);
        bytes[] memory withNewKey = new bytes[](1);
        withNewKey[0] = _signDigest(newKey, _digest(id, c, miners[0]));
        _expectCommitRevert(id, c, withNewKey, _invalidSig(miners[0], newSigner));

        vm.prank(coordinator);
        tasks.commitResults(id, c, sigs);
        assertEq(uint8(_status(id)), uint8(COMMITTED));
        assertEq(tasks.signersOf(id)[0], _signer(0));
    }

    /// @dev A miner gone for good cannot sign: the others commit without it by paying it nothing and crediting it
    /// with no line; it gets its stake back at settlement and nothing else.
    function test_commitResults_withoutTheSignatureOfAMinerPaidNothing() public {
        uint256 id = _assignedTask(alice, 3);
        IT.Commitment memory c = _commitment(ROOT, PAYMENT, 3);
        c.minerAmounts = _split(PAYMENT - _fee(PAYMENT), 2);
        c.minerAmounts = _append(c.minerAmounts, 0);
        bytes[] memory sigs = _signatures(id, c);
        sigs[2] = "";
        vm.prank(coordinator);
        tasks.commitResults(id, c, sigs);
        vm.warp(block.timestamp + CHALLENGE_WINDOW);
        tasks.finalizeTask(id);
        assertEq(escrow.balanceOf(miners[0]), c.minerAmounts[0]);
        assertEq(escrow.balanceOf(miners[1]), c.minerAmounts[1]);
        assertEq(escrow.balanceOf(miners[2]), 0);
        assertEq(_free(miners[2]), MINER_STAKE);
        assertEq(_locked(miners[2]), 0);
        _assertEscrowSolvent();
    }

    /// @dev An empty signature never stands for a miner that is paid or vouches for lines, and a commitment no
    /// miner signed is refused.
    function test_commitResults_anEmptySignatureOnlyForAnUnpaidMinerThatVouchesForNothing() public {
        uint256 id = _assignedTask(alice, 2);
        IT.Commitment memory c = _commitment(ROOT, PAYMENT, 2);
        bytes[] memory sigs = _signatures(id, c);
        sigs[1] = "";
        _expectCommitRevert(id, c, sigs, abi.encodeWithSelector(IT.UnpaidShareRequired.selector, miners[1]));

        c.minerAmounts[0] += c.minerAmounts[1];
        c.minerAmounts[1] = 0;
        c.servedRoots[1] = keccak256("lines the absent miner would vouch for");
        sigs = _signatures(id, c);
        sigs[1] = "";
        _expectCommitRevert(id, c, sigs, abi.encodeWithSelector(IT.UnpaidShareRequired.selector, miners[1]));

        IT.Commitment memory free = _commitment(ROOT, 0, 2);
        sigs = new bytes[](2);
        _expectCommitRevert(id, free, sigs, abi.encodeWithSelector(IT.NoMinerSigned.selector, id));
    }

    function _append(uint256[] memory list, uint256 item) internal pure returns (uint256[] memory longer) {
        longer = new uint256[](list.length + 1);
        for (uint256 i = 0; i < list.length; ++i) {
            longer[i] = list[i];
        }
        longer[list.length] = item;
    }

    // ---- finalizeTask

    function test_finalizeTask_paysSharesFeeAndRefund() public {
        uint256 id = _committed();
        vm.warp(block.timestamp + CHALLENGE_WINDOW);
        for (uint256 i = 0; i < 3; ++i) {
            vm.expectEmit(address(registry));
            emit IGPURegistry.StakeUnlocked(miners[i], MIN_STAKE_LOCK);
        }
        address[5] memory payees = [miners[0], miners[1], miners[2], feeRecipient, alice];
        uint256[5] memory amounts = [uint256(24_629_631), 24_629_629, 24_629_629, 3_888_888, 22_222_223];
        for (uint256 i = 0; i < 5; ++i) {
            vm.expectEmit(address(escrow));
            emit IPaymentEscrow.Credited(payees[i], amounts[i]);
        }
        vm.expectEmit(address(escrow));
        emit IPaymentEscrow.EscrowSettled(id, PAYMENT, alice, 22_222_223);
        vm.expectEmit(address(tasks));
        emit IT.TaskFinalized(id, PAYMENT, 22_222_223);
        vm.prank(stranger); // anyone may finalize
        tasks.finalizeTask(id);

        assertEq(uint8(_status(id)), uint8(FINALIZED));
        assertEq(escrow.escrowOf(id), 0);
        for (uint256 i = 0; i < 5; ++i) {
            assertEq(escrow.balanceOf(payees[i]), amounts[i]);
        }
        for (uint256 i = 0; i < 3; ++i) {
            assertEq(_free(miners[i]), MINER_STAKE);
            assertEq(_locked(miners[i]), 0);
        }
        _assertEscrowSolvent();
    }

    function test_finalizeTask_reverts() public {
        vm.expectRevert(abi.encodeWithSelector(IT.UnknownTask.selector, 0));
        tasks.finalizeTask(0);
        uint256 assigned = _assignedTask(alice, 1);
        vm.expectRevert(_wrongStatus(assigned, ASSIGNED, COMMITTED));
        tasks.finalizeTask(assigned);

        uint256 id = _committed();
        uint256 endsAt = block.timestamp + CHALLENGE_WINDOW;
        vm.warp(endsAt - 1);
        vm.expectRevert(_err(IT.ChallengeWindowOpen.selector, id, endsAt));
        tasks.finalizeTask(id);

        vm.warp(endsAt);
        tasks.finalizeTask(id);
        vm.expectRevert(_wrongStatus(id, FINALIZED, COMMITTED));
        tasks.finalizeTask(id);
        assertEq(escrow.balanceOf(miners[0]), 24_629_631, "paid once");
    }

    function test_finalizeTask_worksWhilePaused() public {
        uint256 id = _committed();
        _pause();
        vm.prank(admin);
        registry.pause();
        vm.warp(block.timestamp + CHALLENGE_WINDOW);
        tasks.finalizeTask(id);
        assertEq(escrow.balanceOf(feeRecipient), 3_888_888);
    }

    // ---- expireTask

    function test_expireTask_refundsOpenTask() public {
        uint256 id = _createTask(alice, MAX_PRICE);
        vm.warp(uint256(tasks.getTask(id).deadline) + 1);
        vm.expectEmit(address(escrow));
        emit IPaymentEscrow.EscrowSettled(id, 0, alice, MAX_PRICE);
        vm.expectEmit(address(tasks));
        emit IT.TaskExpired(id);
        vm.prank(stranger);
        tasks.expireTask(id);
        assertEq(uint8(_status(id)), uint8(IT.TaskStatus.Expired));
        assertEq(escrow.balanceOf(alice), MAX_PRICE);
        assertEq(escrow.escrowOf(id), 0);
    }

    function test_expireTask_refundsAndUnlocksAssignedTask() public {
        uint256 id = _assignedTask(alice, 2);
        vm.warp(uint256(tasks.getTask(id).deadline) + 1);
        vm.expectEmit(address(registry));
        emit IGPURegistry.StakeUnlocked(miners[0], MIN_STAKE_LOCK);
        vm.expectEmit(address(registry));
        emit IGPURegistry.StakeUnlocked(miners[1], MIN_STAKE_LOCK);
        vm.expectEmit(address(escrow));
        emit IPaymentEscrow.Credited(alice, MAX_PRICE);
        vm.expectEmit(address(escrow));
        emit IPaymentEscrow.EscrowSettled(id, 0, alice, MAX_PRICE);
        vm.expectEmit(address(tasks));
        emit IT.TaskExpired(id);
        tasks.expireTask(id);
        assertEq(_free(miners[0]), MINER_STAKE);
        assertEq(_locked(miners[1]), 0);
        assertEq(escrow.balanceOf(alice), MAX_PRICE);
        assertEq(escrow.balanceOf(miners[0]), 0, "nothing earned for a missed deadline");
    }

    function test_expireTask_reverts() public {
        vm.expectRevert(abi.encodeWithSelector(IT.UnknownTask.selector, 1));
        tasks.expireTask(1);
        uint256 id = _assignedTask(alice, 1);
        uint64 deadline = tasks.getTask(id).deadline;
        vm.warp(deadline);
        vm.expectRevert(_err(IT.DeadlineNotPassed.selector, id, deadline));
        tasks.expireTask(id);
    }

    function test_expireTask_revertsForCommittedOrEndedTasks() public {
        uint256 committed = _committed();
        uint256 cancelled = _createTask(alice, MAX_PRICE);
        vm.prank(alice);
        tasks.cancelTask(cancelled);
        uint256 expired = _createTask(alice, MAX_PRICE);
        vm.warp(block.timestamp + TASK_DURATION + 1);
        tasks.expireTask(expired);

        vm.expectRevert(_wrongStatus(committed, COMMITTED, ASSIGNED));
        tasks.expireTask(committed);
        vm.expectRevert(_wrongStatus(cancelled, IT.TaskStatus.Cancelled, ASSIGNED));
        tasks.expireTask(cancelled);
        vm.expectRevert(_wrongStatus(expired, IT.TaskStatus.Expired, ASSIGNED));
        tasks.expireTask(expired);
        assertEq(escrow.balanceOf(alice), 2 * uint256(MAX_PRICE));
    }

    function test_expireTask_worksWhilePaused() public {
        uint256 id = _assignedTask(alice, 1);
        _pause();
        vm.prank(admin);
        registry.pause();
        vm.warp(block.timestamp + TASK_DURATION + 1);
        tasks.expireTask(id);
        assertEq(escrow.balanceOf(alice), MAX_PRICE);
        assertEq(_locked(miners[0]), 0);
    }

    // ---- arbiter entry points

    function test_markDisputed() public {
        uint256 id = _committed();
        bytes memory err = _unauthorized(alice, tasks.ARBITER_ROLE());
        vm.prank(alice);
        vm.expectRevert(err);
        tasks.markDisputed(id);

        uint256 assigned = _assignedTask(alice, 1);
        vm.startPrank(address(arbitration));
        vm.expectRevert(abi.encodeWithSelector(IT.UnknownTask.selector, 99));
        tasks.markDisputed(99);
        vm.expectRevert(_wrongStatus(assigned, ASSIGNED, COMMITTED));
        tasks.markDisputed(assigned);

        vm.warp(block.timestamp + CHALLENGE_WINDOW - 1);
        vm.expectEmit(address(tasks));
        emit IT.TaskDisputed(id, 1);
        tasks.markDisputed(id);
        vm.stopPrank();
        assertEq(uint8(_status(id)), uint8(DISPUTED));

        // A disputed task can be neither finalized nor expired.
        vm.warp(block.timestamp + 30 days);
        vm.expectRevert(_wrongStatus(id, DISPUTED, COMMITTED));
        tasks.finalizeTask(id);
        vm.expectRevert(_wrongStatus(id, DISPUTED, ASSIGNED));
        tasks.expireTask(id);
    }

    function test_markDisputed_revertsAtWindowEnd() public {
        uint256 id = _committed();
        uint256 endsAt = block.timestamp + CHALLENGE_WINDOW;
        vm.warp(endsAt);
        vm.prank(address(arbitration));
        vm.expectRevert(_err(IT.ChallengeWindowClosed.selector, id, endsAt));
        tasks.markDisputed(id);
    }

    function test_resolveDispute_reverts() public {
        uint256 id = _committed();
        bytes memory err = _unauthorized(coordinator, tasks.ARBITER_ROLE());
        vm.prank(coordinator);
        vm.expectRevert(err);
        tasks.resolveDispute(id, true, _miners(1), true);

        vm.startPrank(address(arbitration));
        vm.expectRevert(abi.encodeWithSelector(IT.UnknownTask.selector, 42));
        tasks.resolveDispute(42, true, _miners(1), true);
        vm.expectRevert(_wrongStatus(id, COMMITTED, DISPUTED));
        tasks.resolveDispute(id, true, _miners(1), true);
        vm.stopPrank();
    }

    /// @dev Only assigned miners named in the pipeline are slashed, each once, however the pipeline is written.
    function test_resolveDispute_slashesAssignedPipelineMinersOnce() public {
        uint256 id = _committed();
        vm.prank(address(arbitration));
        tasks.markDisputed(id);
        address[] memory pipeline = new address[](4);
        pipeline[0] = miners[1];
        pipeline[1] = miners[3]; // registered, not assigned here
        pipeline[2] = miners[1];
        pipeline[3] = stranger;

        vm.expectEmit(address(registry));
        emit IGPURegistry.StakeUnlocked(miners[0], MIN_STAKE_LOCK);
        vm.expectEmit(address(registry));
        emit IGPURegistry.StakeSlashed(miners[1], MIN_STAKE_LOCK, address(escrow));
        vm.expectEmit(address(registry));
        emit IGPURegistry.StakeUnlocked(miners[2], MIN_STAKE_LOCK);
        vm.expectEmit(address(escrow));
        emit IPaymentEscrow.EscrowSettled(id, 0, alice, MAX_PRICE);
        vm.expectEmit(address(tasks));
        emit IT.TaskRefunded(id, MIN_STAKE_LOCK);
        vm.prank(address(arbitration));
        assertEq(tasks.resolveDispute(id, true, pipeline, true), MIN_STAKE_LOCK);

        assertEq(uint8(_status(id)), uint8(FINALIZED));
        assertEq(_free(miners[1]), MINER_STAKE - MIN_STAKE_LOCK);
        assertEq(_locked(miners[1]), 0);
        assertEq(_free(miners[3]), MINER_STAKE);
        assertEq(escrow.balanceOf(alice), MAX_PRICE);
        assertEq(
            token.balanceOf(address(escrow)), MAX_PRICE + MIN_STAKE_LOCK, "slash sits in escrow as surplus"
        );
        assertEq(escrow.totalLiabilities(), MAX_PRICE);
    }

    // ---- admin

    function test_setChallengeWindow() public {
        vm.expectEmit(address(tasks));
        emit IT.ChallengeWindowChanged(2 hours);
        vm.prank(governor);
        tasks.setChallengeWindow(2 hours);
        assertEq(tasks.challengeWindow(), 2 hours);
        vm.prank(governor);
        vm.expectRevert(_err(IT.ChallengeWindowTooShort.selector, 59, 60));
        tasks.setChallengeWindow(59);
        vm.prank(stranger);
        vm.expectRevert(_unauthorized(stranger, 0x00));
        tasks.setChallengeWindow(2 hours);
    }

    function test_setCoordinatorFee() public {
        vm.expectEmit(address(tasks));
        emit IT.CoordinatorFeeChanged(2_000, bob);
        vm.prank(governor);
        tasks.setCoordinatorFee(2_000, bob);
        assertEq(tasks.coordinatorFeeBps(), 2_000);
        assertEq(tasks.feeRecipient(), bob);
        vm.prank(governor);
        vm.expectRevert(_err(IT.FeeTooHigh.selector, 2_001, 2_000));
        tasks.setCoordinatorFee(2_001, bob);
        vm.prank(governor);
        vm.expectRevert(IT.ZeroAddress.selector);
        tasks.setCoordinatorFee(0, address(0));
        vm.prank(stranger);
        vm.expectRevert(_unauthorized(stranger, 0x00));
        tasks.setCoordinatorFee(0, bob);
    }

    function test_setMinStakeLock() public {
        vm.expectEmit(address(tasks));
        emit IT.MinStakeLockChanged(0);
        vm.prank(governor);
        tasks.setMinStakeLock(0);
        assertEq(tasks.minStakeLock(), 0);
        uint256 id = _createTask(alice, MAX_PRICE);
        vm.prank(coordinator);
        tasks.assignTask(id, _miners(1), 0, _acceptances(tasks, id, _miners(1), 0));
        assertEq(_locked(miners[0]), 0);
        vm.prank(stranger);
        vm.expectRevert(_unauthorized(stranger, 0x00));
        tasks.setMinStakeLock(1);
    }

    function test_pause_unpause() public {
        bytes32 role = tasks.PAUSER_ROLE();
        vm.prank(stranger);
        vm.expectRevert(_unauthorized(stranger, role));
        tasks.pause();
        vm.expectEmit(address(tasks));
        emit Pausable.Paused(admin);
        _pause();
        assertTrue(tasks.paused());
        vm.prank(stranger);
        vm.expectRevert(_unauthorized(stranger, role));
        tasks.unpause();
        vm.expectEmit(address(tasks));
        emit Pausable.Unpaused(admin);
        vm.prank(admin);
        tasks.unpause();
        assertEq(_createTask(alice, MAX_PRICE), 1, "creation works again");
    }
}
