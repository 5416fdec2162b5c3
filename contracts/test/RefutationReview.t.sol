// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {BaseTest} from "./BaseTest.sol";
import {ITaskRegistry as IT} from "../src/interfaces/ITaskRegistry.sol";
import {IArbitration as IA} from "../src/interfaces/IArbitration.sol";
import {ResultLeaf} from "../src/libraries/ResultLeaf.sol";
import {ResultTree} from "./utils/ResultTree.sol";

/// @notice A second reader's attacks on refutation by signers only, written cold: a malformed subtree cannot frame
/// a signer, and a refutation of a disputed task with a miner left out (and a donation to the escrow) slashes each
/// signer once and leaves the left-out miner whole.
contract RefutationReviewTest is BaseTest {
    uint256 internal constant MASK64 = type(uint64).max;

    function setUp() public override {
        super.setUp();
        _registerAll();
    }

    function _word(ResultLeaf.Leaf memory l) internal pure returns (uint256) {
        return ResultTree.usageWord(l.inputTokens, l.outputTokens);
    }

    // ---- 1. malformed subtree: a node whose usage word is not its children's sum, outside the honest signer's lines

    /// @dev Coordinator + owner: H (miner 0) signs after checking its line (leaf 0, also the witness); leaves 1..3
    /// are made up, and node B (over leaves 2, 3) is written into the root with 1,000,000 more output tokens than
    /// its children add up to. Attempt: refute with a leaf under B to slash H.
    function test_attack_malformedSubtreeCannotFrameASigner() public {
        uint256 id = _createTask(alice, MAX_PRICE);
        _assign(id, _miners(2));
        address h = miners[0];
        ResultLeaf.Leaf[] memory leaves = new ResultLeaf.Leaf[](4);
        leaves[0] = _leaf(id, 0, _one(h));
        for (uint32 i = 1; i < 4; ++i) {
            leaves[i] = _leaf(id, i, _one(miners[1]));
        }
        bytes32[] memory hs = ResultTree.hashLeaves(leaves);
        IT.Commitment memory c = _commitMalformed(id, leaves, hs);
        assertEq(tasks.signedMaskOf(id), 1);

        // H's own check: its line (and witness) yields the committed totals.
        bytes32[] memory p0 = new bytes32[](4);
        p0[0] = hs[1];
        p0[1] = bytes32(_word(leaves[1]));
        p0[2] = sB;
        p0[3] = bytes32(sUbLie);
        vm.expectRevert(abi.encodeWithSelector(IT.UsageMatches.selector, id));
        tasks.refuteUsage(id, leaves[0], p0);

        // The attack: a leaf under the malformed node.
        bytes32[] memory p2 = new bytes32[](4);
        p2[0] = hs[3];
        p2[1] = bytes32(_word(leaves[3]));
        p2[2] = sA;
        p2[3] = bytes32(sUa);
        vm.prank(alice);
        vm.expectRevert(IT.InvalidProof.selector);
        tasks.refuteUsage(id, leaves[2], p2);
        // ... or with the sibling's usage word bent to fit the lie.
        p2[1] = bytes32(_word(leaves[3]) + 1_000_000);
        vm.prank(alice);
        vm.expectRevert(IT.InvalidProof.selector);
        tasks.refuteUsage(id, leaves[2], p2);

        vm.warp(tasks.challengeEndsAt(id));
        tasks.finalizeTask(id);
        assertEq(_free(h), MINER_STAKE, "H whole");
        assertEq(escrow.balanceOf(h), c.payment - _fee(c.payment));
        _assertEscrowSolvent();
    }

    // ---- 2. refutation of a disputed task with a miner left out; accounting

    /// @dev Owner disputes; overstated usage signed by miners 0 and 1, miner 2 left out; anyone refutes while
    /// disputed; the jury then finds at fault. Left-out miner whole, signers once, escrow solvent.
    function test_attack_refutingADisputedTaskWithAMinerLeftOut() public {
        _newVerifiers("juror", 12, 1);
        uint256 id = _assignedTask(alice, 3);
        ResultLeaf.Leaf[] memory leaves = new ResultLeaf.Leaf[](4);
        leaves[0] = _leaf(id, 0, _pair(miners[0], miners[1]));
        leaves[1] = _leaf(id, 1, _one(miners[0]));
        leaves[2] = _leaf(id, 2, _one(miners[1]));
        leaves[3] = _leaf(id, 3, _one(miners[1]));
        (uint64 inputTokens, uint64 outputTokens) = ResultTree.usage(leaves);
        IT.Commitment memory c;
        c.resultsRoot = _rootOf(leaves);
        c.inputTokens = inputTokens;
        c.outputTokens = outputTokens + 7;
        c.payment = tasks.priceOf(id, c.inputTokens, c.outputTokens);
        c.minerAmounts = new uint256[](3);
        uint256[] memory two = _split(c.payment - _fee(c.payment), 2);
        c.minerAmounts[0] = two[0];
        c.minerAmounts[1] = two[1];
        c.servedRoots = ResultTree.servedRoots(leaves, tasks.minersOf(id));
        assertEq(c.servedRoots[2], bytes32(0));
        bytes[] memory sigs = new bytes[](3);
        sigs[0] = _signDigest(signerKeys[0], _digest(id, c, miners[0]));
        sigs[1] = _signDigest(signerKeys[1], _digest(id, c, miners[1]));
        vm.prank(coordinator);
        tasks.commitResults(id, c, sigs);

        _fund(alice, address(escrow), DISPUTE_BOND);
        vm.prank(alice);
        uint256 d = arbitration.openDispute(id, leaves[0], _proofOf(leaves, 0), _servedProofs(leaves, 0));
        // a stranger donates to the escrow just before the refutation
        _mint(stranger, 3);
        vm.prank(stranger);
        token.transfer(address(escrow), 3);
        uint256 pool = escrow.auditPool();
        vm.prank(stranger);
        tasks.refuteUsage(id, leaves[1], _proofOf(leaves, 1));
        assertEq(
            escrow.auditPool(), pool + 2 * STAKE_LOCK + 3, "the signers' locks and the donation: no party's"
        );
        _decide(d, IA.Vote.MinersAtFault);

        assertEq(_free(miners[2]), MINER_STAKE, "left out: whole");
        assertEq(_locked(miners[2]), 0);
        for (uint256 i = 0; i < 2; ++i) {
            assertEq(_free(miners[i]), MINER_STAKE - STAKE_LOCK, "signers: one lock each");
            assertEq(_locked(miners[i]), 0);
        }
        assertEq(escrow.balanceOf(alice), MAX_PRICE + DISPUTE_BOND, "the escrow and the bond back");
        _assertEscrowSolvent();
        assertEq(token.balanceOf(address(registry)), 4 * MINER_STAKE - 2 * STAKE_LOCK);
    }

    bytes32 internal sA;
    bytes32 internal sB;
    uint256 internal sUa;
    uint256 internal sUbLie;

    function _commitMalformed(uint256 id, ResultLeaf.Leaf[] memory leaves, bytes32[] memory hs)
        internal
        returns (IT.Commitment memory c)
    {
        sA = ResultTree.hashNode(hs[0], _word(leaves[0]), hs[1], _word(leaves[1]));
        sUa = _word(leaves[0]) + _word(leaves[1]);
        sB = ResultTree.hashNode(hs[2], _word(leaves[2]), hs[3], _word(leaves[3]));
        sUbLie = _word(leaves[2]) + _word(leaves[3]) + 1_000_000;
        uint256 total = sUa + sUbLie;
        c.resultsRoot = ResultTree.hashNode(sA, sUa, sB, sUbLie);
        c.inputTokens = uint64(total >> 64);
        c.outputTokens = uint64(total & MASK64);
        c.payment = tasks.priceOf(id, c.inputTokens, c.outputTokens);
        c.minerAmounts = new uint256[](2);
        c.minerAmounts[0] = c.payment - _fee(c.payment);
        c.servedRoots = new bytes32[](2);
        c.servedRoots[0] = hs[0];
        bytes[] memory sigs = new bytes[](2);
        sigs[0] = _signDigest(signerKeys[0], _digest(id, c, miners[0]));
        vm.prank(coordinator);
        tasks.commitResults(id, c, sigs);
    }
}
