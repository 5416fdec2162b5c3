// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {BaseTest} from "./BaseTest.sol";
import {IArbitration as IA} from "../src/interfaces/IArbitration.sol";
import {IAudits as IAu} from "../src/interfaces/IAudits.sol";
import {ITaskRegistry as IT} from "../src/interfaces/ITaskRegistry.sol";
import {ResultLeaf} from "../src/libraries/ResultLeaf.sol";
import {BlockRandomness} from "../src/BlockRandomness.sol";
import {Headers} from "./utils/Headers.sol";

/// @notice A cold review's attempts on the random audits (`Audits`) and Arbitration's `openAudit`/`joinDispute`,
/// by a reviewer that did not write them, kept as tests: `test_attack_*` shows an attempt fails (after the fix it
/// led to), `test_defended_*` an idea the code already defended.
contract ReviewAuditsTest is BaseTest {
    IA.Vote internal constant AT_FAULT = IA.Vote.MinersAtFault;
    IA.Vote internal constant CORRECT = IA.Vote.MinersCorrect;

    address internal sybil = makeAddr("attacker's sybil verifier");
    address internal auditor = makeAddr("honest auditor");
    address[] internal jurorPool;

    function setUp() public override {
        super.setUp();
        _registerAll();
        _registerVerifier(sybil, 2 * MIN_VERIFIER_STAKE);
        _registerVerifier(auditor, 2 * MIN_VERIFIER_STAKE);
        jurorPool = _newVerifiers("juror", 30, 1);
        for (uint256 i = 0; i < verifiers.length; ++i) {
            jurorPool.push(verifiers[i]);
        }
        jurorPool.push(auditor);
        _fund(bob, address(escrow), 10 * DISPUTE_BOND);
        vm.prank(bob);
        audits.fundAuditPool(10 * DISPUTE_BOND);
    }

    // ------------------------------------------------------------------------------------------ helpers

    function _openAs(address who, uint256 id, uint256 line) internal returns (uint256) {
        ResultLeaf.Leaf[] memory leaves = _standardLeaves(id);
        vm.prank(who);
        return audits.openAudit(id, leaves[line], _proofOf(leaves, line), _servedProofs(leaves, line));
    }

    function _sumBalances(address[] memory list) internal view returns (uint256 total) {
        for (uint256 i = 0; i < list.length; ++i) {
            total += escrow.balanceOf(list[i]);
        }
    }

    // ------------------------------------------------------------------------------------------ findings

    /// @dev Class 5 (a block builder with a cheating miner), the cold review's grinding proof turned around: the
    /// builder of a block tries header contents for free, one hash each, and a seed that was a block's hash was its
    /// choice (nine tries in ten sealed a task at a 10% rate as not selected; at a full rate it picked the line).
    /// The seed is now the mix hash (prevrandao) of the block SEED_DELAY_BLOCKS after the draw: unknown to the
    /// draw's own builder, and the same in every header the seed block's builder may publish; a header with another
    /// mix hash is not that block's. Whatever extra data the builder grinds, the audit comes out the same.
    function test_attack_builderCannotGrindTheAuditSeed() public {
        uint256 id = _fourLineTask();
        audits.drawAudit(id);
        uint256 seedBlock = audits.auditOf(id).seedBlock;
        assertEq(seedBlock, block.number + 4, "a later block's value, unknown when the draw lands");
        vm.roll(seedBlock + 1);
        bytes32 mix = keccak256("the beacon chain's RANDAO mix");
        IAu.Audit[] memory outcomes = new IAu.Audit[](3);
        for (uint256 attempt = 0; attempt < 3; ++attempt) {
            uint256 snapshot = vm.snapshotState();
            bytes memory published = Headers.withExtraData(abi.encode(attempt), mix);
            vm.setBlockhash(seedBlock, keccak256(published));
            bytes memory wished =
                Headers.withExtraData(abi.encode(attempt), keccak256(abi.encode("wish", attempt)));
            vm.expectRevert(
                abi.encodeWithSelector(
                    BlockRandomness.HeaderMismatch.selector,
                    seedBlock,
                    keccak256(published),
                    keccak256(wished)
                )
            );
            randomness.prove(seedBlock, wished);
            assertEq(randomness.prove(seedBlock, published), mix, "the block's mix hash, whatever the header");
            audits.sealAudit(id);
            outcomes[attempt] = audits.auditOf(id);
            vm.revertToState(snapshot);
        }
        for (uint256 attempt = 1; attempt < 3; ++attempt) {
            assertEq(outcomes[attempt].seed, outcomes[0].seed, "the same seed");
            assertEq(outcomes[attempt].selected, outcomes[0].selected);
            assertEq(outcomes[attempt].requestIndex, outcomes[0].requestIndex);
        }
        assertEq(outcomes[0].seed, keccak256(abi.encode(mix, id)));
    }

    /// @dev A miner and its sybil verifier audit the miner's own correct line and appeal the acquittal, to freeze
    /// the task (the other miners' locks and pay, the owner's escrow) for two rounds. When the opener's penalty and
    /// a lost appeal bond went to the line's miners, the attacker got them back and the freeze cost 1 token. Now
    /// both go to the audit pool: the freeze costs the sybil the seat's penalty and the whole appeal bond, and the
    /// attacker's miner receives nothing.
    function test_attack_selfAuditOfOwnCorrectLine_costsThePenaltyAndTheAppeal() public {
        uint256 id = _fourLineTask();
        _selectLine(id, 1); // line 1: served by m2 alone (the attacker's miner)
        address attackerMiner = miners[2];
        uint256 poolBefore = escrow.auditPool();

        uint256 d = _openAs(sybil, id, 1);
        _runRound(d, CORRECT);
        _fund(sybil, address(escrow), 2 * DISPUTE_BOND);
        vm.prank(sybil);
        arbitration.appeal(d);
        _runRound(d, CORRECT);
        _warpPastAppeal(d);
        arbitration.resolve(d);
        uint256 penalty = audits.settleAudit(id);
        assertEq(penalty, MIN_VERIFIER_STAKE * PENALTY_BPS / 10_000);

        uint256 appealBond = 2 * DISPUTE_BOND;
        uint256 appealReward = appealBond * REWARD_BPS / 10_000;
        uint256 poolReward = DISPUTE_BOND * REWARD_BPS / 10_000; // round 0's, from the pool's own bond
        assertEq(verifierRegistry.verifierOf(sybil).stake, 2 * MIN_VERIFIER_STAKE - penalty, "the penalty");
        assertEq(token.balanceOf(sybil), 0, "the appeal bond");
        assertEq(escrow.balanceOf(attackerMiner), 0, "nothing comes back to the attacker's miner");
        uint256 paidJurors = _sumBalances(jurorPool);
        assertEq(paidJurors, poolReward + appealReward, "the jurors got both rounds' rewards");
        assertEq(
            escrow.auditPool(),
            poolBefore - poolReward + penalty + appealBond - appealReward,
            "the pool: its reward out; the penalty and the appeal bond's rest in"
        );
        _assertEscrowSolvent();
    }

    /// @dev Any verifier (a cheater's sybil that got there first) opens the audit and never draws its jury: after
    /// 256 blocks the round can only end NoDecision. That used to cost it nothing and spend the task's one audit.
    /// Now settling takes the seat's penalty for the pool, and the audit is opened again by an honest auditor,
    /// whose jury convicts the line's miners.
    function test_attack_abandonedAuditCostsItsOpener_andIsOpenedAgain() public {
        uint256 id = _fourLineTask();
        _selectLine(id, 0);
        uint256 stakeBefore = verifierRegistry.verifierOf(sybil).stake;
        uint256 d = _openAs(sybil, id, 0);
        (, IA.Round memory round) = _round(d);
        ResultLeaf.Leaf[] memory leaves = _standardLeaves(id);
        vm.prank(auditor);
        vm.expectRevert(abi.encodeWithSelector(IAu.AuditAlreadyOpened.selector, id, d));
        audits.openAudit(id, leaves[0], _proofOf(leaves, 0), _servedProofs(leaves, 0));
        vm.roll(uint256(round.seedBlock) + 257);
        assertEq(uint8(arbitration.resolve(d)), uint8(IA.DisputeStatus.NoDecision));
        uint256 pool = escrow.auditPool();

        uint256 again = _openAs(auditor, id, 0); // settles the abandoned audit on the way
        uint256 penalty = MIN_VERIFIER_STAKE * PENALTY_BPS / 10_000;
        assertEq(verifierRegistry.verifierOf(sybil).stake, stakeBefore - penalty, "the abandoner pays");
        assertEq(verifierRegistry.verifierOf(sybil).locked, 0);
        assertEq(escrow.auditPool(), pool + penalty - DISPUTE_BOND, "the penalty in, the new bond out");
        IAu.Audit memory audit = audits.auditOf(id);
        assertEq(audit.disputeId, again);
        assertEq(audit.opener, auditor);
        assertFalse(audit.settled);
        _decide(again, AT_FAULT);
        assertEq(_free(miners[0]), MINER_STAKE - STAKE_LOCK, "convicted after all");
        assertEq(_free(miners[1]), MINER_STAKE - STAKE_LOCK);
        assertEq(audits.settleAudit(id), 0, "a conviction costs its opener nothing");
        _assertEscrowSolvent();
    }

    /// @dev An audit whose jury was drawn and that ended undecided is not abandoned: it stays the task's audit.
    function test_anUndecidedAuditIsNotOpenedAgain() public {
        uint256 id = _fourLineTask();
        _selectLine(id, 0);
        uint256 d = _openAs(sybil, id, 0);
        _runRound(d, IA.Vote.None); // drawn; nobody reveals
        _warpPastAppeal(d);
        assertEq(uint8(arbitration.resolve(d)), uint8(IA.DisputeStatus.NoDecision));
        ResultLeaf.Leaf[] memory leaves = _standardLeaves(id);
        vm.prank(auditor);
        vm.expectRevert(abi.encodeWithSelector(IAu.AuditAlreadyOpened.selector, id, d));
        audits.openAudit(id, leaves[0], _proofOf(leaves, 0), _servedProofs(leaves, 0));
        assertEq(audits.settleAudit(id), 0, "no penalty for a drawn, undecided audit");
    }

    // ------------------------------------------------------------------------------------------ defended

    /// @dev Withholding the seal never spares the task: the expired seed redraws, forced selected, whatever the
    /// new seed says; a second expiry redraws again, still forced.
    function test_defended_expiredSeedRedrawIsForced() public {
        uint256 id = _fourLineTask();
        audits.drawAudit(id);
        vm.roll(block.number + 300);
        assertFalse(audits.sealAudit(id));
        assertTrue(audits.auditOf(id).forced);
        vm.roll(block.number + 300); // expired again
        assertFalse(audits.sealAudit(id));
        uint256 redraw = audits.auditOf(id).seedBlock;
        // A seed that would not select at 10%.
        for (uint256 salt = 0;; ++salt) {
            bytes32 hash = keccak256(abi.encode("unselecting", salt));
            if (uint256(keccak256(abi.encode(hash, id))) % 10_000 >= AUDIT_RATE_BPS) {
                vm.roll(redraw + 1);
                _setSeed(redraw, hash);
                break;
            }
        }
        assertTrue(audits.sealAudit(id), "forced");
        vm.expectRevert(abi.encodeWithSelector(IAu.AuditAlreadySealed.selector, id));
        audits.sealAudit(id);
    }

    /// @dev Only the audits contract opens audits; only with a sealed, selected draw and its own line.
    function test_defended_roleGatesAndLineCheck() public {
        uint256 id = _fourLineTask();
        ResultLeaf.Leaf[] memory leaves = _standardLeaves(id);
        bytes32[] memory proof0 = _proofOf(leaves, 0);
        bytes32[][] memory served0 = _servedProofs(leaves, 0);
        bytes32 auditsRole = arbitration.AUDITS_ROLE();
        bytes32 arbiterRole = verifierRegistry.ARBITER_ROLE();
        vm.expectRevert(_unauthorized(sybil, auditsRole));
        vm.prank(sybil);
        arbitration.openAudit(id, sybil, leaves[0], proof0, served0);
        vm.expectRevert(_unauthorized(sybil, arbiterRole));
        vm.prank(sybil);
        verifierRegistry.releaseSeat(sybil, 0, 0);
        vm.expectRevert(_unauthorized(sybil, arbiterRole));
        vm.prank(sybil);
        verifierRegistry.lockSeat(auditor, MIN_VERIFIER_STAKE);
        _selectLine(id, 0);
        vm.prank(auditor);
        vm.expectRevert(abi.encodeWithSelector(IAu.NotAuditedLine.selector, id, 2, 0));
        audits.openAudit(id, leaves[2], _proofOf(leaves, 2), _servedProofs(leaves, 2));
    }

    /// @dev A party (an assigned miner's signer registered as a verifier) cannot open; the opener, however much
    /// stake it holds, is never drawn on its audit's jury, in any round.
    function test_defended_partyCannotOpen_openerNeverOnJury() public {
        address signer0 = _signer(0);
        _registerVerifier(signer0, MIN_VERIFIER_STAKE);
        address whale = makeAddr("whale opener");
        _registerVerifier(whale, 200 * MIN_VERIFIER_STAKE);
        vm.roll(block.number + 1);
        uint256 id = _fourLineTask();
        _selectLine(id, 0);
        ResultLeaf.Leaf[] memory leaves = _standardLeaves(id);
        vm.prank(signer0);
        vm.expectRevert(abi.encodeWithSelector(IA.AuditorIsAParty.selector, id, signer0));
        audits.openAudit(id, leaves[0], _proofOf(leaves, 0), _servedProofs(leaves, 0));

        uint256 d = _openAs(whale, id, 0);
        address[] memory jurors = _drawJury(d);
        assertFalse(_in(jurors, whale), "opener not drawn");
        assertFalse(_in(jurors, signer0), "party not drawn");
    }

    /// @dev settleAudit cannot be made to revert by the joins, a conviction, or stray tokens sent to the escrow;
    /// the opener's seat is always released and the escrow stays solvent.
    function test_defended_settleAlwaysReleasesSeat_andEscrowSolvent() public {
        uint256 id = _fourLineTask();
        _selectLine(id, 2);
        ResultLeaf.Leaf[] memory leaves = _standardLeaves(id);
        bytes32[][] memory served = _servedProofs(leaves, 2);
        bytes32[][] memory one = new bytes32[][](3);
        one[0] = served[0];
        vm.prank(sybil);
        uint256 d = audits.openAudit(id, leaves[2], _proofOf(leaves, 2), one);
        vm.prank(stranger);
        arbitration.joinDispute(d, leaves[2], _proofOf(leaves, 2), served);
        _mint(address(escrow), 12_345); // stray tokens
        _decide(d, CORRECT);
        uint256 pool = escrow.auditPool();
        uint256 penalty = audits.settleAudit(id);
        assertEq(verifierRegistry.verifierOf(sybil).locked, 0);
        // The stray tokens went to the pool with the resolution's float; the penalty follows them.
        assertEq(escrow.auditPool(), pool + penalty, "the penalty to the pool");
        assertEq(escrow.balanceOf(miners[0]) + escrow.balanceOf(miners[1]) + escrow.balanceOf(miners[2]), 0);
        _assertEscrowSolvent();
    }
}
