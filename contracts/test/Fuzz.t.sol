// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {SafeCast} from "@openzeppelin/contracts/utils/math/SafeCast.sol";
import {BaseTest} from "./BaseTest.sol";
import {ResultTree} from "./utils/ResultTree.sol";
import {IArbitration as IA} from "../src/interfaces/IArbitration.sol";
import {ITaskRegistry as IT} from "../src/interfaces/ITaskRegistry.sol";
import {IGPURegistry as IG} from "../src/interfaces/IGPURegistry.sol";
import {ResultLeaf} from "../src/libraries/ResultLeaf.sol";

/// @notice Fuzzed amounts, splits, clocks and Merkle proofs.
contract FuzzTest is BaseTest {
    /// @dev Amounts here range far beyond the value-at-risk cap, which has tests of its own.
    function setUp() public override {
        super.setUp();
        _registerAll();
        vm.prank(governor);
        tasks.setMaxValueAtRisk(type(uint128).max);
    }

    /// @dev Half the runs land within 3 seconds of `edge`, the rest anywhere in [0, 3 * edge].
    function _nearEdge(uint256 raw, uint256 edge) internal pure returns (uint256) {
        return raw % 2 == 0 ? bound(raw >> 1, edge - 3, edge + 3) : bound(raw >> 1, 0, 3 * edge);
    }

    // ---- stakes

    function testFuzz_register_stakeAmount(uint256 stake) public {
        stake = bound(stake, 0, type(uint128).max);
        address m = makeAddr("fuzz miner");
        _fund(m, address(registry), stake);
        vm.prank(m);
        if (stake < MIN_STAKE) {
            vm.expectRevert(abi.encodeWithSelector(IG.StakeBelowMinimum.selector, stake, MIN_STAKE));
        }
        registry.register(_profile(m), stake);
        if (stake < MIN_STAKE) return;
        assertEq(registry.stakeOf(m).free, stake);
        assertEq(token.balanceOf(address(registry)), MINER_COUNT * MINER_STAKE + stake);
    }

    function testFuzz_register_rejectsStakeAbove128Bits(uint256 stake) public {
        stake = bound(stake, uint256(type(uint128).max) + 1, type(uint256).max / 2);
        address m = makeAddr("whale");
        _fund(m, address(registry), stake);
        vm.prank(m);
        vm.expectRevert(abi.encodeWithSelector(SafeCast.SafeCastOverflowedUintDowncast.selector, 128, stake));
        registry.register(_profile(m), stake);
    }

    function testFuzz_stake_addUnstakeWithdraw(uint256 added, uint256 unstake, uint256 wait) public {
        address m = miners[0];
        added = bound(added, 1, 1e30);
        _fund(m, address(registry), added);
        vm.prank(m);
        registry.addStake(added);
        uint256 total = MINER_STAKE + added;
        unstake = bound(unstake, 1, total + 1);
        vm.prank(m);
        if (unstake > total) {
            vm.expectRevert(abi.encodeWithSelector(IG.InsufficientFreeStake.selector, m, unstake, total));
            registry.requestUnstake(unstake);
            return;
        }
        registry.requestUnstake(unstake);
        uint256 releaseAt = block.timestamp + UNBONDING;

        vm.warp(block.timestamp + _nearEdge(wait, UNBONDING));
        vm.prank(m);
        if (block.timestamp < releaseAt) {
            vm.expectRevert(
                abi.encodeWithSelector(IG.UnbondingNotFinished.selector, releaseAt, block.timestamp)
            );
            registry.withdrawStake();
            assertEq(registry.stakeOf(m).unbonding, unstake);
        } else {
            assertEq(registry.withdrawStake(), unstake);
            assertEq(token.balanceOf(m), unstake);
            assertEq(registry.stakeOf(m).unbonding, 0);
        }
        assertEq(registry.stakeOf(m).free, total - unstake);
    }

    /// @dev A lock between the minimum and the task's maximum price (what its miners can earn) is taken with the
    /// miners' consent; any other is refused.
    function testFuzz_assign_stakeLockAmount(uint256 lock) public {
        lock = bound(lock, 0, 2 * MAX_PRICE);
        uint256 id = _createTask(alice, MAX_PRICE);
        IT.Acceptance[] memory accepted = _acceptances(tasks, id, _miners(2), SafeCast.toUint128(lock));
        vm.prank(coordinator);
        if (lock < MIN_STAKE_LOCK) {
            vm.expectRevert(abi.encodeWithSelector(IT.StakeLockTooLow.selector, lock, MIN_STAKE_LOCK));
        } else if (lock > MAX_PRICE) {
            vm.expectRevert(abi.encodeWithSelector(IT.StakeLockTooHigh.selector, lock, MAX_PRICE));
        }
        tasks.assignTask(id, _miners(2), SafeCast.toUint128(lock), accepted);
        if (lock < MIN_STAKE_LOCK || lock > MAX_PRICE) return;
        assertEq(_locked(miners[0]), lock);
        assertEq(_locked(miners[1]), lock);
        vm.warp(uint256(tasks.getTask(id).deadline) + 1);
        tasks.expireTask(id);
        assertEq(_free(miners[0]), MINER_STAKE);
        assertEq(_free(miners[1]), MINER_STAKE);
    }

    function testFuzz_slash_boundedByLockedStake(uint256 lock, uint256 amount) public {
        lock = bound(lock, 0, MINER_STAKE);
        amount = bound(amount, 0, MINER_STAKE);
        vm.startPrank(address(tasks)); // holds the task-manager and slasher roles
        registry.lockStake(miners[0], lock);
        if (amount > lock) {
            vm.expectRevert(
                abi.encodeWithSelector(IG.InsufficientLockedStake.selector, miners[0], amount, lock)
            );
        }
        registry.slash(miners[0], amount, bob);
        vm.stopPrank();
        if (amount > lock) return;
        assertEq(_locked(miners[0]), lock - amount);
        assertEq(_free(miners[0]), MINER_STAKE - lock, "free stake is never slashed");
        assertEq(token.balanceOf(bob), amount);
    }

    // ---- settlement

    function _randomSplit(uint256 total, uint256 n, uint256 seed)
        internal
        pure
        returns (uint256[] memory parts)
    {
        parts = new uint256[](n);
        for (uint256 i = 0; i + 1 < n; ++i) {
            parts[i] = uint256(keccak256(abi.encode(seed, i))) % (total + 1);
            total -= parts[i];
        }
        parts[n - 1] = total;
    }

    /// @dev What `inputTokens` and `outputTokens` cost at these prices, computed here from the spec: rounded
    /// down, capped at the maximum price.
    function _price(uint256 inputTokens, uint256 outputTokens, IT.CreateTaskParams memory p)
        internal
        pure
        returns (uint128)
    {
        uint256 price =
            (inputTokens * p.inputPricePerMillion + outputTokens * p.outputPricePerMillion) / 1e6;
        return uint128(price < p.maxPrice ? price : p.maxPrice);
    }

    function _pricedTask(uint128 maxPrice, uint128 inputPrice, uint128 outputPrice)
        internal
        returns (uint256 id, IT.CreateTaskParams memory p)
    {
        p = _taskParams(maxPrice);
        p.inputPricePerMillion = inputPrice;
        p.outputPricePerMillion = outputPrice;
        _fund(alice, address(escrow), maxPrice);
        vm.prank(alice);
        id = tasks.createTask(p);
    }

    function testFuzz_finalize_paysTheUsageAtTheTaskPrices(
        uint128 maxPrice,
        uint64[2] memory usage,
        uint128[2] memory prices,
        uint256 feeBps,
        uint256 count,
        uint256 seed
    ) public {
        maxPrice = uint128(bound(maxPrice, 1, type(uint128).max / 2));
        feeBps = bound(feeBps, 0, 2_000);
        count = bound(count, 1, MINER_COUNT);
        vm.prank(governor);
        tasks.setCoordinatorFee(feeBps, feeRecipient);

        (uint256 id, IT.CreateTaskParams memory p) = _pricedTask(maxPrice, prices[0], prices[1]);
        _assign(id, _miners(count));
        uint128 payment = _price(usage[0], usage[1], p);
        assertEq(tasks.priceOf(id, usage[0], usage[1]), payment);
        uint256 fee = uint256(payment) * feeBps / 10_000;
        IT.Commitment memory c = _commitment(keccak256(abi.encode(seed)), 0, count);
        (c.inputTokens, c.outputTokens, c.payment) = (usage[0], usage[1], payment);
        c.minerAmounts = _randomSplit(payment - fee, count, seed);
        _commit(id, c);
        assertEq(tasks.getTask(id).fee, fee);
        vm.warp(tasks.challengeEndsAt(id));
        tasks.finalizeTask(id);

        uint256 paid = escrow.balanceOf(feeRecipient);
        assertEq(paid, fee);
        for (uint256 i = 0; i < count; ++i) {
            assertEq(escrow.balanceOf(miners[i]), c.minerAmounts[i]);
            assertEq(_locked(miners[i]), 0);
            paid += c.minerAmounts[i];
        }
        assertEq(paid, payment, "miners and fee get exactly the payment");
        assertEq(escrow.balanceOf(alice), maxPrice - payment, "the rest goes back");
        _assertEscrowSolvent();
    }

    function testFuzz_commit_sharesMustAddUp(uint256 index, uint256 delta, bool up) public {
        uint256 id = _assignedTask(alice, 3);
        IT.Commitment memory c = _commitment(keccak256("r"), PAYMENT, 3);
        index = bound(index, 0, 2);
        uint256 expected = PAYMENT - _fee(PAYMENT);
        delta = bound(delta, 1, up ? 1e30 : c.minerAmounts[index]);
        if (up) c.minerAmounts[index] += delta;
        else c.minerAmounts[index] -= delta;
        bytes[] memory sigs = _signatures(id, c);
        vm.prank(coordinator);
        vm.expectRevert(
            abi.encodeWithSelector(
                IT.SharesDoNotAddUp.selector, up ? expected + delta : expected - delta, expected
            )
        );
        tasks.commitResults(id, c, sigs);
    }

    /// @dev A payment other than the committed usage's price is refused, above or below it, and so is one above
    /// the maximum price.
    function testFuzz_commit_paymentMustBeTheUsagePrice(
        uint128 maxPrice,
        uint64[2] memory usage,
        uint128[2] memory prices,
        uint128 payment
    ) public {
        maxPrice = uint128(bound(maxPrice, 1, 1e30));
        prices[0] = uint128(bound(prices[0], 0, 1e30));
        prices[1] = uint128(bound(prices[1], 0, 1e30));
        (uint256 id, IT.CreateTaskParams memory p) = _pricedTask(maxPrice, prices[0], prices[1]);
        _assign(id, _miners(1));
        uint128 expected = _price(usage[0], usage[1], p);
        vm.assume(payment != expected);
        IT.Commitment memory c = _commitment(keccak256("r"), 0, 1);
        (c.inputTokens, c.outputTokens, c.payment) = (usage[0], usage[1], payment);
        c.minerAmounts[0] = payment - uint128(_fee(payment));
        bytes[] memory sigs = _signatures(id, c);
        vm.prank(coordinator);
        vm.expectRevert(abi.encodeWithSelector(IT.PaymentMismatch.selector, payment, expected));
        tasks.commitResults(id, c, sigs);
    }

    // ---- clocks

    function testFuzz_createTask_deadline(uint256 offset) public {
        uint64 deadline = uint64(block.timestamp - 100 days + bound(offset, 0, 200 days));
        IT.CreateTaskParams memory p = _taskParams(MAX_PRICE);
        p.deadline = deadline;
        _fund(alice, address(escrow), MAX_PRICE);
        bool valid = deadline > block.timestamp && deadline <= block.timestamp + 90 days;
        vm.prank(alice);
        if (!valid) {
            vm.expectRevert(abi.encodeWithSelector(IT.InvalidDeadline.selector, deadline, block.timestamp));
        }
        tasks.createTask(p);
        if (valid) assertEq(tasks.getTask(1).deadline, deadline);
    }

    /// @dev Until the deadline (inclusive) a task can be assigned and committed but not expired; after, the reverse.
    function testFuzz_taskDeadlineBoundary(uint256 wait) public {
        uint256 open = _createTask(alice, MAX_PRICE);
        uint256 assigned = _assignedTask(bob, 1);
        uint64 deadline = tasks.getTask(open).deadline;
        IT.Commitment memory c = _commitment(keccak256("r"), PAYMENT, 1);
        bytes[] memory sigs = _signatures(assigned, c);

        vm.warp(block.timestamp + _nearEdge(wait, TASK_DURATION));
        if (block.timestamp <= deadline) {
            uint256 snap = vm.snapshotState();
            _assign(open, _miners(2));
            vm.prank(coordinator);
            tasks.commitResults(assigned, c, sigs);
            vm.revertToState(snap);
            vm.expectRevert(abi.encodeWithSelector(IT.DeadlineNotPassed.selector, open, deadline));
            tasks.expireTask(open);
            vm.expectRevert(abi.encodeWithSelector(IT.DeadlineNotPassed.selector, assigned, deadline));
            tasks.expireTask(assigned);
        } else {
            vm.startPrank(coordinator);
            vm.expectRevert(abi.encodeWithSelector(IT.DeadlinePassed.selector, open, deadline));
            tasks.assignTask(open, _miners(2), STAKE_LOCK, _acceptances(tasks, open, _miners(2), STAKE_LOCK));
            vm.expectRevert(abi.encodeWithSelector(IT.DeadlinePassed.selector, assigned, deadline));
            tasks.commitResults(assigned, c, sigs);
            vm.stopPrank();
            tasks.expireTask(open);
            tasks.expireTask(assigned);
            assertEq(escrow.balanceOf(alice) + escrow.balanceOf(bob), 2 * uint256(MAX_PRICE));
            assertEq(_locked(miners[0]), 0);
        }
    }

    /// @dev Inside the challenge window the owner can dispute and nobody can finalize; from its end, the reverse.
    function testFuzz_challengeWindowBoundary(uint256 wait) public {
        uint256 id = _committedTask(alice);
        uint256 endsAt = tasks.challengeEndsAt(id);
        assertEq(endsAt, block.timestamp + CHALLENGE_WINDOW);
        ResultLeaf.Leaf[] memory ls = _standardLeaves(id);
        bytes32[] memory proof = _proofOf(ls, 0);
        bytes32[][] memory served = _servedProofs(ls, 0);
        _fund(alice, address(escrow), DISPUTE_BOND);

        vm.warp(block.timestamp + _nearEdge(wait, CHALLENGE_WINDOW));
        if (block.timestamp < endsAt) {
            vm.expectRevert(abi.encodeWithSelector(IT.ChallengeWindowOpen.selector, id, endsAt));
            tasks.finalizeTask(id);
            vm.prank(alice);
            arbitration.openDispute(id, ls[0], proof, served);
            assertEq(uint8(_status(id)), uint8(IT.TaskStatus.Disputed));
        } else {
            vm.prank(alice);
            vm.expectRevert(abi.encodeWithSelector(IT.ChallengeWindowClosed.selector, id, endsAt));
            arbitration.openDispute(id, ls[0], proof, served);
            tasks.finalizeTask(id);
            assertEq(uint8(_status(id)), uint8(IT.TaskStatus.Finalized));
        }
    }

    // ---- proofs

    function _randomLeaves(uint256 taskId, uint256 n, uint256 seed)
        internal
        view
        returns (ResultLeaf.Leaf[] memory ls)
    {
        ls = new ResultLeaf.Leaf[](n);
        for (uint256 i = 0; i < n; ++i) {
            uint256 r = uint256(keccak256(abi.encode(seed, i)));
            address[] memory pipeline = new address[]((r >> 8) % 4);
            for (uint256 j = 0; j < pipeline.length; ++j) {
                pipeline[j] = miners[(r >> (16 + 8 * j)) % 3];
            }
            bytes32 h = bytes32(r);
            ls[i] = ResultLeaf.Leaf(
                taskId, SafeCast.toUint32(i), h, ~h, h ^ bytes32(i), SafeCast.toUint32(r >> 224), 7, pipeline
            );
        }
    }

    /// @dev A deep copy of `leaf` with one field, chosen by `which`, changed.
    function _tamper(ResultLeaf.Leaf memory leaf, uint256 which)
        internal
        view
        returns (ResultLeaf.Leaf memory t)
    {
        t = abi.decode(abi.encode(leaf), (ResultLeaf.Leaf));
        which %= 7;
        if (which == 0) t.requestIndex ^= 1;
        else if (which == 1) t.customIdHash ^= bytes32(uint256(1));
        else if (which == 2) t.inputHash ^= bytes32(uint256(1) << 255);
        else if (which == 3) t.outputHash = keccak256(abi.encode(t.outputHash));
        else if (which == 4) t.inputTokens ^= 1;
        else if (which == 5) t.outputTokens ^= 1 << 31;
        else if (t.pipeline.length == 0) t.pipeline = _miners(1);
        else t.pipeline[t.pipeline.length - 1] = miners[3];
    }

    /// @dev Random tasks of 1..40 requests: every genuine leaf proves at its own position only; no tampered leaf,
    /// bent proof or other position does; the miners held to account are exactly the pipeline's (each once).
    function testFuzz_proof_randomTrees(uint256 n, uint256 index, uint256 seed, uint256 which) public {
        n = bound(n, 1, 40);
        index = bound(index, 0, n - 1);
        IT.CreateTaskParams memory p = _taskParams(MAX_PRICE);
        p.requestCount = uint32(n);
        _fund(alice, address(escrow), MAX_PRICE);
        vm.prank(alice);
        uint256 id = tasks.createTask(p);
        _assign(id, _miners(3));
        ResultLeaf.Leaf[] memory ls = _randomLeaves(id, n, seed);
        if (ls[index].pipeline.length == 0) ls[index].pipeline = _miners(1);
        _commitLeaves(id, ls);
        _fund(alice, address(escrow), DISPUTE_BOND);
        bytes32[] memory proof = ResultTree.proof(ls, index);
        bytes32[][] memory served = _servedProofs(ls, index);

        vm.startPrank(alice);
        vm.expectRevert(IT.InvalidProof.selector);
        arbitration.openDispute(id, _tamper(ls[index], which), proof, served);
        if (proof.length > 0) {
            bytes32[] memory bent = abi.decode(abi.encode(proof), (bytes32[]));
            bent[seed % proof.length] ^= bytes32(uint256(1));
            vm.expectRevert(IT.InvalidProof.selector);
            arbitration.openDispute(id, ls[index], bent, served);
        }
        if (n > 1) {
            // another line's proof does not place this leaf anywhere
            uint256 other = (index + 1 + seed % (n - 1)) % n;
            vm.expectRevert(IT.InvalidProof.selector);
            arbitration.openDispute(id, ls[index], ResultTree.proof(ls, other), served);
        }
        uint256 disputeId = arbitration.openDispute(id, ls[index], proof, served);
        vm.stopPrank();
        assertEq(arbitration.getDispute(disputeId).leafHash, ResultTree.hashLeaf(ls[index]));
        assertEq(arbitration.getDispute(disputeId).requestIndex, index);
        address[] memory held = arbitration.pipelineOf(disputeId);
        for (uint256 k = 0; k < ls[index].pipeline.length; ++k) {
            assertTrue(_in(held, ls[index].pipeline[k]), "a miner of the pipeline is not held to account");
        }
        for (uint256 a = 0; a < held.length; ++a) {
            for (uint256 b = 0; b < a; ++b) {
                assertTrue(held[a] != held[b], "a miner is held to account twice");
            }
        }
    }
}
