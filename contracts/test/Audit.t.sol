// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {IERC20Errors} from "@openzeppelin/contracts/interfaces/draft-IERC6093.sol";
import {SafeCast} from "@openzeppelin/contracts/utils/math/SafeCast.sol";
import {BaseTest} from "./BaseTest.sol";
import {ResultTree} from "./utils/ResultTree.sol";
import {IArbitration as IA} from "../src/interfaces/IArbitration.sol";
import {ITaskRegistry} from "../src/interfaces/ITaskRegistry.sol";
import {IPaymentEscrow} from "../src/interfaces/IPaymentEscrow.sol";
import {ResultLeaf} from "../src/libraries/ResultLeaf.sol";

/// @notice Random audits: drawing and sealing the seed, the selection it makes, opening an audit and every way it
/// refuses, and the exact money of each outcome. The audited task is the standard one of Dispute.t.sol with four
/// requests (one per standard leaf): 100e6 escrowed by alice, miners 0..2 lock 10e6 each, 77_777_777 committed
/// (fee 3_888_888, shares 24_629_631 / 24_629_629 / 24_629_629, refund 22_222_223); bond 5e6; reward 10%.
contract AuditTest is BaseTest {
    uint256 internal constant FEE = 3_888_888;
    uint256 internal constant SHARE0 = 24_629_631;
    uint256 internal constant SHARE = 24_629_629;
    uint256 internal constant REFUND = 22_222_223;
    uint32 internal constant LINES = 4;
    uint256 internal constant POOL = 3 * DISPUTE_BOND;

    IA.Vote internal constant AT_FAULT = IA.Vote.MinersAtFault;
    IA.Vote internal constant CORRECT = IA.Vote.MinersCorrect;

    address internal sponsor = makeAddr("sponsor");
    uint256 internal taskId;

    function setUp() public override {
        super.setUp();
        _registerAll();
        taskId = _auditableTask(alice);
        _fundPool(POOL);
    }

    // ---- helpers

    /// @dev The standard committed task, with one request per standard leaf.
    function _auditableTask(address owner) internal returns (uint256 id) {
        ITaskRegistry.CreateTaskParams memory p = _taskParams(MAX_PRICE);
        p.requestCount = LINES;
        _fund(owner, address(escrow), MAX_PRICE);
        vm.prank(owner);
        id = tasks.createTask(p);
        _assign(id, _miners(3));
        _commit(id, _commitment(_rootOf(_standardLeaves(id)), PAYMENT, 3));
    }

    function _fundPool(uint256 amount) internal {
        _fund(sponsor, address(escrow), amount);
        vm.prank(sponsor);
        arbitration.fundAuditPool(amount);
    }

    /// @dev The selection definition, written out from the spec.
    function _seed(uint256 id, bytes32 blockHash) internal pure returns (bytes32) {
        return keccak256(abi.encode(blockHash, id));
    }

    function _selects(bytes32 seed, uint256 rate) internal pure returns (bool) {
        return uint256(seed) % 10_000 < rate;
    }

    function _line(bytes32 seed, uint256 requestCount) internal pure returns (uint256) {
        return uint256(keccak256(abi.encode(seed, uint256(1)))) % requestCount;
    }

    /// @dev Draws now, gives the draw's block `blockHash` and seals in the next block.
    function _drawAndSeal(uint256 id, bytes32 blockHash) internal returns (bool selected) {
        arbitration.drawAudit(id);
        uint256 drawn = block.number;
        vm.roll(drawn + 1);
        vm.setBlockhash(drawn, blockHash);
        selected = arbitration.sealAudit(id);
    }

    /// @dev A block hash that selects task `id` (at the current rate) with `line` audited, or does not select it.
    function _hashFor(uint256 id, bool selected, uint256 line) internal view returns (bytes32 h) {
        uint256 rate = arbitration.auditRateBps();
        for (uint256 i = 0; i < 100_000; ++i) {
            h = keccak256(abi.encode("block", i));
            bytes32 seed = _seed(id, h);
            if (_selects(seed, rate) == selected && (!selected || _line(seed, LINES) == line)) return h;
        }
        revert("AuditTest: no such hash");
    }

    function _select(uint256 id, uint256 line) internal {
        assertTrue(_drawAndSeal(id, _hashFor(id, true, line)));
        assertEq(arbitration.auditOf(id).requestIndex, line);
    }

    function _openAudit(uint256 id, uint256 line, address auditor) internal returns (uint256) {
        ResultLeaf.Leaf[] memory ls = _standardLeaves(id);
        vm.prank(auditor);
        return arbitration.openAudit(id, ls[line], _proofOf(ls, line));
    }

    function _expectAuditRevert(ResultLeaf.Leaf memory leaf, bytes32[] memory proof, bytes memory err)
        internal
    {
        vm.prank(verifiers[0]);
        vm.expectRevert(err);
        arbitration.openAudit(taskId, leaf, proof);
    }

    function _assertAudit(uint256 id, uint256 drawBlock, bytes32 seed, bool selected, uint256 line)
        internal
        view
    {
        IA.Audit memory a = arbitration.auditOf(id);
        assertEq(a.drawBlock, drawBlock, "draw block");
        assertEq(a.seed, seed, "seed");
        assertEq(a.selected, selected, "selected");
        assertEq(a.requestIndex, line, "line");
    }

    // ---- config

    function test_setAuditRate() public {
        vm.expectEmit(address(arbitration));
        emit IA.AuditRateChanged(10_000);
        vm.prank(admin);
        arbitration.setAuditRate(10_000);
        assertEq(arbitration.auditRateBps(), 10_000);
        vm.prank(admin);
        arbitration.setAuditRate(0);
        assertEq(arbitration.auditRateBps(), 0);
        vm.prank(admin);
        vm.expectRevert(abi.encodeWithSelector(IA.AuditRateTooHigh.selector, 10_001, 10_000));
        arbitration.setAuditRate(10_001);
        vm.prank(stranger);
        vm.expectRevert(_unauthorized(stranger, 0x00));
        arbitration.setAuditRate(1);
    }

    // ---- pool

    function test_fundAuditPool() public {
        uint256 held = token.balanceOf(address(escrow));
        _fund(bob, address(escrow), 2e6);
        vm.expectEmit(address(escrow));
        emit IPaymentEscrow.AuditPoolFunded(bob, 2e6);
        vm.prank(bob);
        arbitration.fundAuditPool(2e6);
        assertEq(escrow.auditPool(), POOL + 2e6);
        assertEq(token.balanceOf(address(escrow)), held + 2e6);
        assertEq(token.balanceOf(bob), 0);
        assertEq(escrow.balanceOf(bob), 0);
        _assertEscrowSolvent();

        vm.prank(bob);
        vm.expectRevert(IPaymentEscrow.ZeroAmount.selector);
        arbitration.fundAuditPool(0);
        vm.prank(bob);
        vm.expectRevert(
            abi.encodeWithSelector(IERC20Errors.ERC20InsufficientAllowance.selector, address(escrow), 0, 1)
        );
        arbitration.fundAuditPool(1);
    }

    // ---- draw

    function test_drawAudit_recordsTheBlock() public {
        vm.roll(1234);
        vm.expectEmit(address(arbitration));
        emit IA.AuditDrawn(taskId, 1234);
        vm.prank(stranger);
        arbitration.drawAudit(taskId);
        _assertAudit(taskId, 1234, 0, false, 0);
    }

    function test_drawAudit_reverts() public {
        vm.prank(admin);
        arbitration.setAuditRate(0);
        vm.expectRevert(IA.AuditsDisabled.selector);
        arbitration.drawAudit(taskId);
        vm.prank(admin);
        arbitration.setAuditRate(AUDIT_RATE_BPS);

        vm.expectRevert(abi.encodeWithSelector(ITaskRegistry.UnknownTask.selector, 99));
        arbitration.drawAudit(99);
        uint256 assigned = _assignedTask(bob, 1);
        vm.expectRevert(
            _wrongStatus(
                assigned, ITaskRegistry.TaskStatus.Assigned, ITaskRegistry.TaskStatus.ResultsCommitted
            )
        );
        arbitration.drawAudit(assigned);

        // Disputed by its owner: no audit.
        uint256 disputed = _auditableTask(bob);
        _fund(bob, address(escrow), DISPUTE_BOND);
        ResultLeaf.Leaf[] memory ls = _standardLeaves(disputed);
        vm.prank(bob);
        arbitration.openDispute(disputed, ls[0], _proofOf(ls, 0));
        vm.expectRevert(
            _wrongStatus(
                disputed, ITaskRegistry.TaskStatus.Disputed, ITaskRegistry.TaskStatus.ResultsCommitted
            )
        );
        arbitration.drawAudit(disputed);

        // Only inside the challenge window.
        uint256 endsAt = tasks.challengeEndsAt(taskId);
        vm.warp(endsAt);
        vm.expectRevert(abi.encodeWithSelector(ITaskRegistry.ChallengeWindowClosed.selector, taskId, endsAt));
        arbitration.drawAudit(taskId);
        tasks.finalizeTask(taskId);
        vm.expectRevert(
            _wrongStatus(
                taskId, ITaskRegistry.TaskStatus.Finalized, ITaskRegistry.TaskStatus.ResultsCommitted
            )
        );
        arbitration.drawAudit(taskId);
    }

    /// @dev Once per task: a second draw waits until an unsealed seed's block hash is gone for good.
    function test_drawAudit_againOnlyAfterTheUnsealedSeedExpired() public {
        uint256 drawn = block.number;
        arbitration.drawAudit(taskId);
        bytes memory again = abi.encodeWithSelector(IA.AuditAlreadyDrawn.selector, taskId, drawn);
        vm.expectRevert(again);
        arbitration.drawAudit(taskId);
        vm.roll(drawn + 256); // blockhash(drawn) is still available: seal it, or wait
        vm.expectRevert(again);
        arbitration.drawAudit(taskId);
        uint256 snap = vm.snapshotState();
        assertEq(arbitration.auditOf(taskId).seed, 0);
        arbitration.sealAudit(taskId); // the last block it can be sealed in
        assertTrue(arbitration.auditOf(taskId).seed != 0);
        vm.revertToState(snap);

        vm.roll(drawn + 257);
        vm.expectRevert(abi.encodeWithSelector(IA.AuditSeedExpired.selector, taskId, drawn));
        arbitration.sealAudit(taskId);
        vm.expectEmit(address(arbitration));
        emit IA.AuditDrawn(taskId, drawn + 257);
        arbitration.drawAudit(taskId);
        _assertAudit(taskId, drawn + 257, 0, false, 0);
        vm.roll(drawn + 259);
        arbitration.sealAudit(taskId);

        // Sealed: never drawn again.
        vm.roll(drawn + 10_000);
        vm.expectRevert(abi.encodeWithSelector(IA.AuditAlreadyDrawn.selector, taskId, drawn + 257));
        arbitration.drawAudit(taskId);
    }

    // ---- seal

    /// @dev With the chain's own block hash, not a test-set one.
    function test_sealAudit_seedIsTheDrawBlocksHash() public {
        uint256 drawn = block.number;
        arbitration.drawAudit(taskId);
        vm.roll(drawn + 1);
        bytes32 blockHash = blockhash(drawn);
        assertTrue(blockHash != 0);
        bytes32 seed = _seed(taskId, blockHash);
        bool selected = _selects(seed, AUDIT_RATE_BPS);
        uint32 line = selected ? uint32(_line(seed, LINES)) : 0;
        vm.expectEmit(address(arbitration));
        emit IA.AuditSealed(taskId, seed, selected, line);
        vm.prank(stranger);
        assertEq(arbitration.sealAudit(taskId), selected);
        _assertAudit(taskId, drawn, seed, selected, line);
    }

    function test_sealAudit_selectsTheLineItsSeedNames() public {
        for (uint256 line = 0; line < LINES; ++line) {
            uint256 snap = vm.snapshotState();
            bytes32 h = _hashFor(taskId, true, line);
            uint256 drawn = block.number;
            assertTrue(_drawAndSeal(taskId, h));
            _assertAudit(taskId, drawn, _seed(taskId, h), true, line);
            vm.revertToState(snap);
        }
        bytes32 no = _hashFor(taskId, false, 0);
        assertFalse(_drawAndSeal(taskId, no));
        _assertAudit(taskId, block.number - 1, _seed(taskId, no), false, 0);
    }

    function test_sealAudit_reverts() public {
        vm.expectRevert(abi.encodeWithSelector(IA.AuditNotDrawn.selector, taskId));
        arbitration.sealAudit(taskId);
        uint256 drawn = block.number;
        arbitration.drawAudit(taskId);
        bytes memory notReady = abi.encodeWithSelector(IA.AuditSeedNotReady.selector, taskId, drawn + 1);
        vm.expectRevert(notReady); // the seed's block is the current one: its hash is not known yet
        arbitration.sealAudit(taskId);

        // A chain that gives no hash for the block (never on the EVM inside 256 blocks) cannot seal.
        vm.roll(drawn + 1);
        vm.setBlockhash(drawn, 0);
        vm.expectRevert(abi.encodeWithSelector(IA.AuditSeedExpired.selector, taskId, drawn));
        arbitration.sealAudit(taskId);

        vm.setBlockhash(drawn, keccak256("a block"));
        arbitration.sealAudit(taskId);
        bytes32 seed = arbitration.auditOf(taskId).seed;
        vm.expectRevert(abi.encodeWithSelector(IA.AuditAlreadySealed.selector, taskId, seed));
        arbitration.sealAudit(taskId);
    }

    /// @dev The rate that counts is the one when the seed is sealed; later changes do not move a sealed draw.
    function test_sealAudit_rateFixedAtSealing() public {
        bytes32 h = _hashFor(taskId, true, 2);
        arbitration.drawAudit(taskId);
        uint256 drawn = block.number;
        vm.roll(drawn + 1);
        vm.setBlockhash(drawn, h);
        vm.prank(admin);
        arbitration.setAuditRate(0); // stops new draws; this one seals unselected
        assertFalse(arbitration.sealAudit(taskId));
        vm.prank(admin);
        arbitration.setAuditRate(10_000);
        _assertAudit(taskId, drawn, _seed(taskId, h), false, 0);
        vm.expectRevert(abi.encodeWithSelector(IA.TaskNotSelected.selector, taskId));
        _openAudit(taskId, 2, verifiers[0]);

        // Selected at 10%, then audits are switched off: the selected audit still opens.
        vm.prank(admin);
        arbitration.setAuditRate(AUDIT_RATE_BPS);
        uint256 other = _auditableTask(bob);
        _select(other, 1);
        vm.prank(admin);
        arbitration.setAuditRate(0);
        _openAudit(other, 1, verifiers[0]);
    }

    /// @dev The definition: seed = keccak256(abi.encode(blockhash(drawBlock), taskId)); selected iff
    /// uint256(seed) % 10_000 < auditRateBps; line = uint256(keccak256(abi.encode(seed, 1))) % requestCount.
    function testFuzz_selectionDefinition(bytes32 blockHash, uint256 rate, uint32 requestCount, uint8 delay)
        public
    {
        vm.assume(blockHash != 0);
        rate = bound(rate, 1, 10_000);
        requestCount = uint32(bound(requestCount, 1, type(uint32).max));
        vm.prank(admin);
        arbitration.setAuditRate(rate);
        ITaskRegistry.CreateTaskParams memory p = _taskParams(MAX_PRICE);
        p.requestCount = requestCount;
        _fund(bob, address(escrow), MAX_PRICE);
        vm.prank(bob);
        uint256 id = tasks.createTask(p);
        _assign(id, _miners(1));
        _commit(id, _commitment(keccak256("results"), PAYMENT, 1));

        uint256 drawn = block.number;
        arbitration.drawAudit(id);
        vm.roll(drawn + 1 + uint256(delay)); // any block while the hash is available
        vm.setBlockhash(drawn, blockHash);
        bool selected = arbitration.sealAudit(id);

        bytes32 seed = keccak256(abi.encode(blockHash, id));
        bool expected = uint256(seed) % 10_000 < rate;
        assertEq(selected, expected);
        uint256 line = expected ? uint256(keccak256(abi.encode(seed, uint256(1)))) % requestCount : 0;
        _assertAudit(id, drawn, seed, expected, line);
        assertLt(arbitration.auditOf(id).requestIndex, requestCount);
    }

    /// @dev At 10_000 every draw is selected; the audited line covers every line over many seeds.
    function test_selection_fullRateAuditsEveryTaskAndEveryLine() public {
        vm.prank(admin);
        arbitration.setAuditRate(10_000);
        bool[LINES] memory seen;
        for (uint256 i = 0; i < 32; ++i) {
            uint256 snap = vm.snapshotState();
            assertTrue(_drawAndSeal(taskId, keccak256(abi.encode(i))));
            seen[arbitration.auditOf(taskId).requestIndex] = true;
            vm.revertToState(snap);
        }
        for (uint256 line = 0; line < LINES; ++line) {
            assertTrue(seen[line]);
        }
    }

    // ---- open

    function test_openAudit_opensTheOwnersDisputeFromThePool() public {
        _select(taskId, 1);
        ResultLeaf.Leaf[] memory ls = _standardLeaves(taskId);
        bytes32 leafHash = ResultTree.hashLeaf(ls[1]);
        uint64 deadline = SafeCast.toUint64(block.timestamp + VOTING_PERIOD);
        uint256 held = token.balanceOf(address(escrow));
        vm.expectEmit(address(tasks));
        emit ITaskRegistry.TaskDisputed(taskId);
        vm.expectEmit(address(escrow));
        emit IPaymentEscrow.AuditBondPosted(1, DISPUTE_BOND);
        vm.expectEmit(address(arbitration));
        emit IA.DisputeOpened(1, taskId, alice, 1, leafHash, SafeCast.toUint128(DISPUTE_BOND), deadline);
        vm.expectEmit(address(arbitration));
        emit IA.AuditOpened(1, taskId, verifiers[3]);
        assertEq(_openAudit(taskId, 1, verifiers[3]), 1);

        assertEq(
            abi.encode(arbitration.getDispute(1)),
            abi.encode(
                IA.Dispute(
                    taskId,
                    alice,
                    deadline,
                    IA.DisputeStatus.Open,
                    0,
                    0,
                    SafeCast.toUint128(DISPUTE_BOND),
                    1,
                    uint64(block.number),
                    true,
                    leafHash
                )
            )
        );
        assertEq(arbitration.pipelineOf(1), ls[1].pipeline);
        assertEq(arbitration.disputeOfTask(taskId), 1);
        assertEq(uint8(_status(taskId)), uint8(ITaskRegistry.TaskStatus.Disputed));
        assertEq(escrow.bondOf(1), DISPUTE_BOND);
        assertEq(escrow.auditPool(), POOL - DISPUTE_BOND);
        assertEq(token.balanceOf(address(escrow)), held, "no token moved");
        assertEq(token.balanceOf(alice), 0, "the owner pays nothing");
        _assertEscrowSolvent();

        // The owner's one dispute is taken by the audit.
        _fund(alice, address(escrow), DISPUTE_BOND);
        vm.prank(alice);
        vm.expectRevert(abi.encodeWithSelector(IA.DisputeAlreadyOpen.selector, taskId, 1));
        arbitration.openDispute(taskId, ls[0], _proofOf(ls, 0));
    }

    function test_openAudit_revertsBeforeSelection() public {
        ResultLeaf.Leaf[] memory ls = _standardLeaves(taskId);
        bytes32[] memory proof = _proofOf(ls, 0);
        _expectAuditRevert(ls[0], proof, abi.encodeWithSelector(IA.AuditNotSealed.selector, taskId));
        arbitration.drawAudit(taskId);
        _expectAuditRevert(ls[0], proof, abi.encodeWithSelector(IA.AuditNotSealed.selector, taskId));
        vm.roll(block.number + 1);
        vm.setBlockhash(block.number - 1, _hashFor(taskId, false, 0));
        arbitration.sealAudit(taskId);
        for (uint256 i = 0; i < LINES; ++i) {
            _expectAuditRevert(
                ls[i], _proofOf(ls, i), abi.encodeWithSelector(IA.TaskNotSelected.selector, taskId)
            );
        }
    }

    function test_openAudit_reverts() public {
        _select(taskId, 2);
        ResultLeaf.Leaf[] memory ls = _standardLeaves(taskId);
        bytes32[] memory proof = _proofOf(ls, 2);

        // Only an active verifier.
        vm.prank(alice);
        vm.expectRevert(abi.encodeWithSelector(IA.NotVerifier.selector, alice));
        arbitration.openAudit(taskId, ls[2], proof);
        vm.prank(verifiers[1]);
        arbitration.requestVerifierExit();
        vm.prank(verifiers[1]);
        vm.expectRevert(abi.encodeWithSelector(IA.NotVerifier.selector, verifiers[1]));
        arbitration.openAudit(taskId, ls[2], proof);

        // Only the selected line, proven in the committed root, with openDispute's checks.
        _expectAuditRevert(
            ls[1], _proofOf(ls, 1), abi.encodeWithSelector(IA.NotAuditedLine.selector, taskId, 1, 2)
        );
        _expectAuditRevert(ls[2], new bytes32[](65), abi.encodeWithSelector(IA.ProofTooLong.selector, 65, 64));
        _expectAuditRevert(
            _leaf(taskId, 2, new address[](33)),
            proof,
            abi.encodeWithSelector(IA.PipelineTooLong.selector, 33, 32)
        );
        ResultLeaf.Leaf memory leaf = _standardLeaves(taskId)[2];
        leaf.taskId = taskId + 1;
        _expectAuditRevert(
            leaf, proof, abi.encodeWithSelector(IA.LeafTaskMismatch.selector, taskId, taskId + 1)
        );
        leaf = _standardLeaves(taskId)[2];
        leaf.outputHash = keccak256("another answer");
        _expectAuditRevert(leaf, proof, abi.encodeWithSelector(IA.InvalidProof.selector));
        _expectAuditRevert(ls[2], _proofOf(ls, 1), abi.encodeWithSelector(IA.InvalidProof.selector));

        // Only inside the challenge window.
        uint256 snap = vm.snapshotState();
        uint256 endsAt = tasks.challengeEndsAt(taskId);
        vm.warp(endsAt);
        _expectAuditRevert(
            ls[2], proof, abi.encodeWithSelector(ITaskRegistry.ChallengeWindowClosed.selector, taskId, endsAt)
        );
        vm.revertToState(snap);

        // Only while the pool covers the bond.
        vm.prank(admin);
        arbitration.setDisputeBond(POOL + 1);
        _expectAuditRevert(
            ls[2], proof, abi.encodeWithSelector(IPaymentEscrow.AuditPoolTooSmall.selector, POOL, POOL + 1)
        );
        vm.prank(admin);
        arbitration.setDisputeBond(POOL);
        assertEq(_openAudit(taskId, 2, verifiers[0]), 1);
        assertEq(escrow.auditPool(), 0);

        // At most one dispute per task.
        _expectAuditRevert(ls[2], proof, abi.encodeWithSelector(IA.DisputeAlreadyOpen.selector, taskId, 1));
        assertEq(arbitration.disputeCount(), 1);
    }

    /// @dev The owner disputed first: the audit finds the task's one dispute taken.
    function test_openAudit_afterTheOwnersDispute() public {
        _select(taskId, 0);
        uint256 id = _openDispute(taskId, 3);
        vm.expectRevert(abi.encodeWithSelector(IA.DisputeAlreadyOpen.selector, taskId, id));
        _openAudit(taskId, 0, verifiers[0]);
    }

    // ---- outcomes

    /// @dev alice, miners 0..3, the fee recipient, verifiers 0..3.
    function _who() internal view returns (address[10] memory) {
        return [
            alice,
            miners[0],
            miners[1],
            miners[2],
            miners[3],
            feeRecipient,
            verifiers[0],
            verifiers[1],
            verifiers[2],
            verifiers[3]
        ];
    }

    /// @dev Escrow balances of `_who()` and the pool are exactly as expected and backed; after everyone withdraws
    /// the escrow holds exactly the pool.
    function _checkPayouts(uint256[10] memory expected, uint256 pool) internal {
        address[10] memory who = _who();
        uint256 total = pool;
        for (uint256 i = 0; i < 10; ++i) {
            assertEq(escrow.balanceOf(who[i]), expected[i], vm.toString(who[i]));
            total += expected[i];
        }
        assertEq(escrow.auditPool(), pool, "pool");
        assertEq(escrow.balanceOf(sponsor), 0, "the sponsor gets nothing back");
        assertEq(escrow.totalLiabilities(), total, "liabilities");
        assertEq(escrow.escrowOf(taskId), 0, "escrow settled");
        assertEq(escrow.bondOf(1), 0, "bond settled");
        _assertEscrowSolvent();
        for (uint256 i = 0; i < 10; ++i) {
            uint256 before = token.balanceOf(who[i]);
            if (expected[i] > 0) {
                vm.prank(who[i]);
                assertEq(escrow.withdraw(), expected[i]);
            }
            assertEq(token.balanceOf(who[i]) - before, expected[i]);
        }
        assertEq(token.balanceOf(address(escrow)), pool, "the escrow holds the pool");
        assertEq(escrow.totalLiabilities(), pool);
    }

    function _resolve(uint256 disputeId, IA.DisputeStatus expected) internal {
        _warpPastVoting(disputeId);
        vm.prank(stranger);
        assertEq(uint8(arbitration.resolve(disputeId)), uint8(expected));
        assertEq(uint8(arbitration.getDispute(disputeId).status), uint8(expected));
        assertEq(uint8(_status(taskId)), uint8(ITaskRegistry.TaskStatus.Finalized));
    }

    /// @dev Line 0 ([m0, m1]); three verifiers find fault, one disagrees: exactly an owner's dispute (20e6 slashed,
    /// 666_666 to each winning voter, 18_000_002 and the whole escrow to alice), and the bond back to the pool.
    function test_atFault_refundsOwnerSlashesAndRefillsThePool() public {
        _select(taskId, 0);
        uint256 id = _openAudit(taskId, 0, verifiers[0]);
        _vote(id, 0, AT_FAULT);
        _vote(id, 1, CORRECT);
        _vote(id, 2, AT_FAULT);
        _vote(id, 3, AT_FAULT);
        _warpPastVoting(id);
        vm.expectEmit(address(escrow));
        emit IPaymentEscrow.Credited(alice, 18_000_002);
        vm.expectEmit(address(escrow));
        emit IPaymentEscrow.AuditBondReturned(id, DISPUTE_BOND);
        vm.expectEmit(address(arbitration));
        emit IA.DisputeResolved(id, IA.DisputeStatus.MinersAtFault, 20e6, 2e6, 3);
        arbitration.resolve(id);

        uint256[10] memory expected =
            [uint256(MAX_PRICE) + 18_000_002, 0, 0, 0, 0, 0, 666_666, 0, 666_666, 666_666];
        _checkPayouts(expected, POOL);
        assertEq(registry.stakeOf(miners[0]).free, MINER_STAKE - MIN_STAKE_LOCK);
        assertEq(registry.stakeOf(miners[1]).free, MINER_STAKE - MIN_STAKE_LOCK);
        assertEq(registry.stakeOf(miners[2]).free, MINER_STAKE);
        assertEq(token.balanceOf(alice), MAX_PRICE + 18_000_002, "alice paid nothing and got everything back");
    }

    /// @dev Line 2 ([m0, m1, m2]); three say correct: the task settles, and the pool's bond is forfeited exactly
    /// as an owner's (166_666 to each winning voter, 1_500_000 to each pipeline miner, dust 2 to the first).
    function test_correct_forfeitsThePoolsBond() public {
        _select(taskId, 2);
        uint256 id = _openAudit(taskId, 2, verifiers[1]);
        _vote(id, 0, CORRECT);
        _vote(id, 1, CORRECT);
        _vote(id, 2, AT_FAULT);
        _vote(id, 3, CORRECT);
        _warpPastVoting(id);
        vm.expectEmit(address(escrow));
        emit IPaymentEscrow.BondSettled(id, 499_998 + 3 * 1_500_000, miners[0], 2);
        vm.expectEmit(address(arbitration));
        emit IA.DisputeResolved(id, IA.DisputeStatus.MinersCorrect, 0, 500_000, 3);
        arbitration.resolve(id);

        uint256[10] memory expected = [
            REFUND,
            SHARE0 + 1_500_000 + 2,
            SHARE + 1_500_000,
            SHARE + 1_500_000,
            0,
            FEE,
            166_666,
            166_666,
            0,
            166_666
        ];
        _checkPayouts(expected, POOL - DISPUTE_BOND);
        assertEq(token.balanceOf(alice), REFUND, "alice paid only the payment, no bond");
    }

    /// @dev Line 3 names no miner: what the voters do not take goes to the fee recipient, as for an owner.
    function test_correct_emptyPipelinePaysFeeRecipient() public {
        _select(taskId, 3);
        uint256 id = _openAudit(taskId, 3, verifiers[0]);
        _vote(id, 0, CORRECT);
        _vote(id, 1, CORRECT);
        _vote(id, 2, CORRECT);
        _resolve(id, IA.DisputeStatus.MinersCorrect);
        uint256[10] memory expected =
            [REFUND, SHARE0, SHARE, SHARE, 0, FEE + 4_500_002, 166_666, 166_666, 166_666, 0];
        _checkPayouts(expected, POOL - DISPUTE_BOND);
    }

    /// @dev No votes, or a tie: the results stand and the bond goes back to the pool.
    function test_noDecision_returnsTheBondToThePool() public {
        _select(taskId, 1);
        uint256 id = _openAudit(taskId, 1, verifiers[2]);
        _vote(id, 0, CORRECT);
        _vote(id, 1, AT_FAULT);
        vm.expectEmit(address(escrow));
        emit IPaymentEscrow.AuditBondReturned(id, DISPUTE_BOND);
        vm.expectEmit(address(arbitration));
        emit IA.DisputeResolved(id, IA.DisputeStatus.NoDecision, 0, 0, 0);
        _resolve(id, IA.DisputeStatus.NoDecision);
        uint256[10] memory expected = [REFUND, SHARE0, SHARE, SHARE, 0, FEE, 0, 0, 0, 0];
        _checkPayouts(expected, POOL);
    }

    /// @dev A verifier registered after the audit opened cannot vote on it, like on any dispute.
    function test_audit_votesOnlyFromEarlierVerifiers() public {
        _select(taskId, 1);
        address late = makeAddr("late verifier");
        _registerVerifier(late);
        uint256 id = _openAudit(taskId, 1, verifiers[0]);
        vm.roll(block.number + 1);
        vm.prank(late);
        vm.expectRevert(abi.encodeWithSelector(IA.VerifierNotEligible.selector, id, late));
        arbitration.vote(id, AT_FAULT);
        _vote(id, 0, AT_FAULT); // the auditor itself may vote
        assertEq(arbitration.getDispute(id).votesAtFault, 1);
    }
}
