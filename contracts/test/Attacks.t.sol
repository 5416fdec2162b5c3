// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {Math} from "@openzeppelin/contracts/utils/math/Math.sol";
import {ERC20} from "@openzeppelin/contracts/token/ERC20/ERC20.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {BaseTest} from "./BaseTest.sol";
import {PaymentEscrow} from "../src/PaymentEscrow.sol";
import {VerifierRegistry} from "../src/VerifierRegistry.sol";
import {GPURegistry} from "../src/GPURegistry.sol";
import {IGPURegistry as IG} from "../src/interfaces/IGPURegistry.sol";
import {IArbitration as IA} from "../src/interfaces/IArbitration.sol";
import {IAudits as IAu} from "../src/interfaces/IAudits.sol";
import {ITaskRegistry as IT} from "../src/interfaces/ITaskRegistry.sol";
import {IPaymentEscrow as IE} from "../src/interfaces/IPaymentEscrow.sol";
import {IVerifierRegistry as IV} from "../src/interfaces/IVerifierRegistry.sol";
import {ResultLeaf} from "../src/libraries/ResultLeaf.sol";
import {ResultTree} from "./utils/ResultTree.sol";

/// @notice A token that keeps 1% of every transfer: the escrow and the verifier registry must refuse it.
contract FeeOnTransferToken is ERC20 {
    constructor() ERC20("Fee", "FEE") {}

    function mint(address to, uint256 amount) external {
        _mint(to, amount);
    }

    function _update(address from, address to, uint256 value) internal override {
        if (from == address(0) || to == address(0)) return super._update(from, to, value);
        super._update(from, to, value - value / 100);
        super._update(from, address(0xdead), value / 100);
    }
}

/// @notice Every attack of the security review, written as the attacker's attempt: each fails, and the honest
/// parties end with exactly what they are owed.
contract AttacksTest is BaseTest {
    IA.Vote internal constant AT_FAULT = IA.Vote.MinersAtFault;
    IA.Vote internal constant CORRECT = IA.Vote.MinersCorrect;
    uint256 internal constant SEAT_PENALTY = MIN_VERIFIER_STAKE * PENALTY_BPS / 10_000;
    /// @dev The miners' committed shares of PAYMENT (fee taken), dust to the first.
    uint256 internal constant SHARE_0 = 24_629_631;
    uint256 internal constant SHARE = 24_629_629;
    uint256 internal constant REFUND = 22_222_223;

    address[] internal honest;
    address[] internal sybils;

    function setUp() public override {
        super.setUp();
        _registerAll();
    }

    // ---- helpers

    /// @dev Draws the current round; jurors in `liars` vote `lie`, everyone else votes `truth`.
    function _round(uint256 disputeId, address[] memory liars, IA.Vote lie, IA.Vote truth)
        internal
        returns (address[] memory jurors)
    {
        jurors = _drawJury(disputeId);
        IA.Vote[] memory votes = new IA.Vote[](jurors.length);
        for (uint256 i = 0; i < jurors.length; ++i) {
            votes[i] = _in(liars, jurors[i]) ? lie : truth;
        }
        _runRoundWith(disputeId, jurors, votes);
    }

    function _outcomeOf(uint256 disputeId) internal view returns (IA.DisputeStatus) {
        return arbitration.getDispute(disputeId).status;
    }

    /// @dev Seats `who` held over every round of the dispute.
    function _seatsOver(uint256 disputeId, address who) internal view returns (uint256 seats) {
        uint8 last = arbitration.getDispute(disputeId).round;
        for (uint8 r = 0; r <= last; ++r) {
            seats += _seats(disputeId, r, who);
        }
    }

    function _assertMinersWhole() internal view {
        for (uint256 i = 0; i < 3; ++i) {
            assertEq(_free(miners[i]), MINER_STAKE, "an honest miner's stake is whole");
            assertEq(_locked(miners[i]), 0);
        }
    }

    // ---- 1. vote stuffing

    /// @dev Twenty sybil verifiers, registered first at the minimum stake, try to convict honest miners. Honest
    /// verifiers hold five times their stake. The miners appeal each conviction; the last jury, weighted by
    /// stake, acquits. Every sybil seat loses half its stake; the honest miners lose nothing.
    function test_attack_sybilStuffing_cannotOutvoteStake() public {
        sybils = _newVerifiers("sybil", 20, 1);
        honest = _newVerifiers("honest", 10, 10);
        uint256 id = _committedTask(alice);
        uint256 d = _openDispute(id, 0); // leaf 0: [m0, m1], a correct line
        uint256 appealBonds;
        while (true) {
            _round(d, sybils, AT_FAULT, CORRECT);
            (uint8 r, IA.Round memory round) = _round(d);
            bool convicted = round.votesAtFault > round.votesCorrect;
            if (!convicted || r == 2) break;
            appealBonds += _appeal(d, miners[0]);
        }
        _warpPastAppeal(d);
        arbitration.resolve(d);
        assertEq(uint8(_outcomeOf(d)), uint8(IA.DisputeStatus.MinersCorrect));

        uint256 sybilSeats;
        for (uint256 i = 0; i < sybils.length; ++i) {
            uint256 seats = _seatsOver(d, sybils[i]);
            sybilSeats += seats;
            assertEq(_stake(sybils[i]), MIN_VERIFIER_STAKE - seats * SEAT_PENALTY, "a lying sybil pays");
            assertEq(escrow.balanceOf(sybils[i]), 0);
        }
        uint256 honestSeats;
        for (uint256 i = 0; i < honest.length; ++i) {
            honestSeats += _seatsOver(d, honest[i]);
        }
        for (uint256 i = 0; i < VERIFIER_COUNT; ++i) {
            honestSeats += _seatsOver(d, verifiers[i]);
        }
        uint256 perSeat = (sybilSeats * SEAT_PENALTY + DISPUTE_BOND / 10) / honestSeats;
        for (uint256 i = 0; i < honest.length; ++i) {
            assertEq(escrow.balanceOf(honest[i]), perSeat * _seatsOver(d, honest[i]));
            assertEq(_stake(honest[i]), 10 * MIN_VERIFIER_STAKE);
        }
        _assertMinersWhole();
        assertEq(escrow.balanceOf(miners[0]), SHARE_0 + DISPUTE_BOND * 9 / 20 + appealBonds);
        assertEq(escrow.balanceOf(miners[1]), SHARE + DISPUTE_BOND * 9 / 20);
        assertEq(escrow.balanceOf(miners[2]), SHARE);
        assertEq(escrow.balanceOf(alice), REFUND);
        _assertEscrowSolvent();
    }

    // ---- 2. parties on their own dispute

    /// @dev The owner, the coordinator, every assigned miner and a miner's signer stake heavily as verifiers
    /// (three quarters of the weight): none of them is ever drawn, in any round, and their weight is cut out of
    /// the draw, so it cannot leave the appeal rounds short either.
    function test_attack_partiesNeverSitOnTheirJury() public {
        address[] memory parties = new address[](6);
        (parties[0], parties[1], parties[2], parties[3], parties[4], parties[5]) =
        (alice, coordinator, miners[0], miners[1], miners[2], _signer(0));
        for (uint256 i = 0; i < parties.length; ++i) {
            _registerVerifier(parties[i], 50 * MIN_VERIFIER_STAKE);
        }
        honest = _newVerifiers("honest", 10, 10);
        uint256 d = _openDispute(_committedTask(alice), 0);
        for (uint8 r = 0; r < 3; ++r) {
            address[] memory jurors = _runRound(d, AT_FAULT);
            IA.Round memory round = arbitration.roundOf(d, r);
            assertEq(round.seatsDrawn, round.seats, "the parties' weight takes no draws: every seat filled");
            for (uint256 i = 0; i < parties.length; ++i) {
                assertFalse(_in(jurors, parties[i]), "a party sat on its own jury");
            }
            if (r < 2) _appeal(d, miners[0]);
        }
    }

    // ---- 3. wrong votes cost stake

    /// @dev One juror votes against the majority and one stays silent: each loses half a seat's stake per seat,
    /// which the coherent seats share with the reward.
    function test_attack_incoherentJurorsLoseStake() public {
        honest = _newVerifiers("juror", 12, 1);
        uint256 d = _openDispute(_committedTask(alice), 1); // leaf 1: [m2], a wrong line
        address[] memory jurors = _drawJury(d);
        uint256 n = jurors.length;
        assertGe(n, 4, "sixteen one-seat verifiers: at least four jurors");
        IA.Vote[] memory votes = new IA.Vote[](n);
        for (uint256 i = 0; i < n - 2; ++i) {
            votes[i] = AT_FAULT;
        }
        (votes[n - 2], votes[n - 1]) = (CORRECT, IA.Vote.None);
        uint256 wrongSeats = _seats(d, 0, jurors[n - 2]) + _seats(d, 0, jurors[n - 1]);
        assertEq(wrongSeats, 2, "this seed: the dissenter and the silent juror hold one seat each");
        _runRoundWith(d, jurors, votes);
        _warpPastAppeal(d);
        arbitration.resolve(d);
        assertEq(uint8(_outcomeOf(d)), uint8(IA.DisputeStatus.MinersAtFault));

        uint256 reward = STAKE_LOCK / 10;
        uint256 perSeat = (2 * SEAT_PENALTY + reward) / 3;
        for (uint256 i = 0; i < n - 2; ++i) {
            assertEq(escrow.balanceOf(jurors[i]), perSeat * _seats(d, 0, jurors[i]));
            assertEq(_stake(jurors[i]), MIN_VERIFIER_STAKE);
            assertEq(verifierRegistry.verifierOf(jurors[i]).locked, 0);
        }
        for (uint256 i = n - 2; i < n; ++i) {
            assertEq(escrow.balanceOf(jurors[i]), 0);
            assertEq(_stake(jurors[i]), MIN_VERIFIER_STAKE - SEAT_PENALTY);
            assertEq(verifierRegistry.verifierOf(jurors[i]).locked, 0);
        }
        assertEq(
            escrow.auditPool(),
            STAKE_LOCK - reward + (2 * SEAT_PENALTY + reward) % 3,
            "the slash's rest, dust"
        );
        assertEq(escrow.balanceOf(alice), MAX_PRICE + DISPUTE_BOND, "refund and bond: a slash is no party's");
        assertEq(_free(miners[2]), MINER_STAKE - STAKE_LOCK, "the wrong line's miner is slashed");
        assertEq(_free(miners[0]), MINER_STAKE, "miners of other lines are untouched");
        _assertEscrowSolvent();
    }

    // ---- 4. copying votes

    /// @dev No one reveals while others still commit, commits late, or reveals a vote it did not commit.
    function test_attack_revealBeforeCommitDeadlineFails() public {
        uint256 d = _openDispute(_committedTask(alice), 0);
        address[] memory jurors = _drawJury(d);
        _commitVote(d, jurors[0], CORRECT);
        vm.prank(jurors[0]);
        vm.expectRevert(abi.encodeWithSelector(IA.NotRevealPhase.selector, d, 0));
        arbitration.revealVote(d, CORRECT, _salt(jurors[0]));
        vm.expectRevert(abi.encodeWithSelector(IA.NotJuror.selector, d, 0, stranger));
        vm.prank(stranger);
        arbitration.commitVote(d, keccak256("x"));

        vm.warp(arbitration.roundOf(d, 0).commitDeadline);
        if (jurors.length > 1) {
            vm.prank(jurors[1]);
            vm.expectRevert(abi.encodeWithSelector(IA.NotCommitPhase.selector, d, 0));
            arbitration.commitVote(d, keccak256("late"));
        }
        vm.prank(jurors[0]);
        vm.expectRevert(abi.encodeWithSelector(IA.CommitmentMismatch.selector, d, jurors[0]));
        arbitration.revealVote(d, AT_FAULT, _salt(jurors[0]));
        _revealVote(d, jurors[0], CORRECT);
        vm.prank(jurors[0]);
        vm.expectRevert(abi.encodeWithSelector(IA.AlreadyRevealed.selector, d, jurors[0]));
        arbitration.revealVote(d, CORRECT, _salt(jurors[0]));
    }

    // ---- audits

    /// @dev A heavily staked auditor opens an audit and is never drawn onto its jury; a task's miner cannot
    /// audit the task at all.
    function test_attack_auditorCannotJudgeOwnAudit() public {
        address auditor = makeAddr("auditor");
        _registerVerifier(auditor, 100 * MIN_VERIFIER_STAKE);
        _registerVerifier(miners[0], MIN_VERIFIER_STAKE);
        honest = _newVerifiers("honest", 5, 2);
        uint256 id = _auditableTask();
        _selectedAudit(id);
        vm.expectRevert(abi.encodeWithSelector(IA.AuditorIsAParty.selector, id, miners[0]));
        this.openAuditAs(id, miners[0]);
        uint256 d = _openAudit(id, auditor);
        address[] memory jurors = _drawJury(d);
        assertFalse(_in(jurors, auditor), "the auditor sat on its own audit");
    }

    function openAuditAs(uint256 id, address auditor) external returns (uint256) {
        return _openAudit(id, auditor);
    }

    /// @dev An audit of a correct line: the pool gets its bond back less the jurors' reward (under the daily
    /// cap); the miners get nothing from the pool; the task then settles as committed.
    function test_attack_honestAuditReturnsPoolBond() public {
        honest = _newVerifiers("honest", 10, 1);
        uint256 id = _auditableTask();
        uint256 line = _selectedAudit(id);
        uint256 pool = escrow.auditPool();
        uint256 d = _openAudit(id, verifiers[0]);
        address[] memory jurors = _runRound(d, CORRECT);
        _warpPastAppeal(d);
        arbitration.resolve(d);
        assertEq(uint8(_outcomeOf(d)), uint8(IA.DisputeStatus.MinersCorrect));
        uint256 seats = arbitration.roundOf(d, 0).seatsDrawn;
        uint256 reward = DISPUTE_BOND / 10;
        assertEq(escrow.auditPool(), pool - reward + reward % seats, "bond back, less the reward paid");
        for (uint256 i = 0; i < jurors.length; ++i) {
            assertEq(escrow.balanceOf(jurors[i]), reward / seats * _seats(d, 0, jurors[i]));
        }
        for (uint256 i = 0; i < 3; ++i) {
            assertEq(escrow.balanceOf(miners[i]), 0, "no pool money to miners");
        }
        assertEq(uint8(_status(id)), uint8(IT.TaskStatus.ResultsCommitted), "audit done, window still runs");
        vm.warp(tasks.challengeEndsAt(id));
        tasks.finalizeTask(id);
        assertEq(escrow.balanceOf(miners[0]), SHARE_0);
        line;
        _assertMinersWhole();
        _assertEscrowSolvent();
    }

    /// @dev While an audit runs past the end of the challenge window, the owner still opens its own dispute of
    /// another line; the audit's time extends the owner's window.
    function test_attack_auditDoesNotBlockOwnerDispute() public {
        honest = _newVerifiers("honest", 10, 2);
        uint256 id = _auditableTask();
        uint256 line = _selectedAudit(id);
        uint256 windowEnd = tasks.challengeEndsAt(id);
        vm.warp(windowEnd - 1 hours);
        uint256 audit = _openAudit(id, verifiers[0]);
        address[] memory auditJury = _drawJury(audit);
        vm.warp(windowEnd + 1);
        uint256 other = (line + 1) % 4;
        uint256 d = _openDispute(id, other);
        assertEq(tasks.openDisputesOf(id), 2);
        assertEq(arbitration.disputeOfTask(id), d);
        address[] memory ownerJury = _drawJury(d);
        // Both juries vote "correct"; the phases of the two disputes interleave.
        for (uint256 i = 0; i < auditJury.length; ++i) {
            _commitVote(audit, auditJury[i], CORRECT);
        }
        for (uint256 i = 0; i < ownerJury.length; ++i) {
            _commitVote(d, ownerJury[i], CORRECT);
        }
        vm.warp(arbitration.roundOf(d, 0).commitDeadline);
        for (uint256 i = 0; i < auditJury.length; ++i) {
            _revealVote(audit, auditJury[i], CORRECT);
        }
        for (uint256 i = 0; i < ownerJury.length; ++i) {
            _revealVote(d, ownerJury[i], CORRECT);
        }
        vm.warp(arbitration.roundOf(audit, 0).appealDeadline);
        arbitration.resolve(audit);
        assertEq(uint8(_status(id)), uint8(IT.TaskStatus.Disputed), "the owner's dispute still runs");
        vm.warp(arbitration.roundOf(d, 0).appealDeadline);
        arbitration.resolve(d);
        assertEq(uint8(_status(id)), uint8(IT.TaskStatus.Finalized));
        _assertMinersWhole();
        _assertEscrowSolvent();
    }

    /// @dev Class 10(a): the party an audit would catch draws it (or waits for someone to) and lets the seed
    /// expire unproven (its block's hash gone), once or again and again, at an audit rate that would almost never select the
    /// task. Every expiry draws the audit again and forces it selected: the last seal selects a line, an honest
    /// verifier opens the audit, and the task's window is still open for it.
    function test_attack_withheldSealForcesTheAudit() public {
        _setAuditRate(1);
        uint256 id = _committedTask(alice);
        audits.drawAudit(id);
        for (uint256 expiry = 0; expiry < 3; ++expiry) {
            vm.roll(audits.auditOf(id).seedBlock + 257);
            assertFalse(audits.sealAudit(id), "an expired seed seals nothing");
            IAu.Audit memory redrawn = audits.auditOf(id);
            assertEq(redrawn.seedBlock, block.number + 4, "drawn again from the block that found it expired");
            assertTrue(redrawn.forced);
            assertFalse(redrawn.isSealed);
        }
        vm.expectRevert(abi.encodeWithSelector(IAu.AuditAlreadyDrawn.selector, id, block.number + 4));
        audits.drawAudit(id);
        vm.expectRevert(abi.encodeWithSelector(IAu.AuditSeedNotReady.selector, id, block.number + 5));
        audits.sealAudit(id);
        // A seed that alone would not select the task at 1 bps.
        bytes32 hash = keccak256("an unlucky seed");
        _mineSeed(id, hash);
        assertGe(uint256(keccak256(abi.encode(hash, id))) % 10_000, 1, "the rate alone would skip it");
        assertTrue(audits.sealAudit(id), "forced: selected whatever the seed says");
        vm.expectRevert(abi.encodeWithSelector(IAu.AuditAlreadySealed.selector, id));
        audits.sealAudit(id);
        uint256 line = audits.auditOf(id).requestIndex;
        _fund(bob, address(escrow), DISPUTE_BOND);
        vm.prank(bob);
        audits.fundAuditPool(DISPUTE_BOND);
        ResultLeaf.Leaf[] memory leaves = _standardLeaves(id);
        vm.prank(verifiers[0]);
        uint256 d = audits.openAudit(id, leaves[line], _proofOf(leaves, line), _servedProofs(leaves, line));
        assertTrue(arbitration.getDispute(d).audit);
        assertEq(uint8(_status(id)), uint8(IT.TaskStatus.Disputed));
    }

    /// @dev A task the seed does not select stays unselected: no one can open its audit.
    function test_anUnselectedAudit_cannotBeOpened() public {
        _setAuditRate(1);
        uint256 id = _committedTask(alice);
        audits.drawAudit(id);
        _mineSeed(id, keccak256("an unlucky seed"));
        assertFalse(audits.sealAudit(id));
        assertTrue(audits.auditOf(id).isSealed);
        ResultLeaf.Leaf[] memory leaves = _standardLeaves(id);
        vm.prank(verifiers[0]);
        vm.expectRevert(abi.encodeWithSelector(IAu.TaskNotSelected.selector, id));
        audits.openAudit(id, leaves[0], _proofOf(leaves, 0), _servedProofs(leaves, 0));
    }

    // ---- framing a miner

    /// @dev Leaf 0 names a spare miner beside its real pipeline, leaf 3 names only the spare; the spare served
    /// nothing, so it signs an empty served root, as an honest node does.
    function _framingTask() internal returns (uint256 id, ResultLeaf.Leaf[] memory leaves) {
        id = _assignedTask(alice, 4);
        leaves = _standardLeaves(id);
        address spare = miners[3];
        address[] memory framed = new address[](3);
        (framed[0], framed[1], framed[2]) = (miners[0], miners[1], spare);
        leaves[0].pipeline = framed;
        leaves[3].pipeline = new address[](1);
        leaves[3].pipeline[0] = spare;
        IT.Commitment memory c = _commitment(_rootOf(leaves), PAYMENT, 4);
        c.servedRoots = ResultTree.servedRoots(leaves, tasks.minersOf(id));
        c.servedRoots[3] = bytes32(0);
        _commit(id, c);
        _fund(alice, address(escrow), DISPUTE_BOND);
    }

    /// @dev The coordinator writes a spare miner into pipelines of lines it never served, and the owner disputes
    /// them: a line only the spare is named on cannot be disputed at all (with no proof or a made-up one), and a
    /// conviction on a line it was added to slashes only the miners whose own signature covers the line. The spare
    /// ends with its whole stake, free.
    function test_attack_spareMinerCannotBeFramed() public {
        honest = _newVerifiers("juror", 12, 1);
        (uint256 id, ResultLeaf.Leaf[] memory leaves) = _framingTask();
        bytes32[][] memory madeUp = new bytes32[][](1);
        madeUp[0] = new bytes32[](1);
        madeUp[0][0] = keccak256("made up");
        vm.startPrank(alice);
        vm.expectRevert(abi.encodeWithSelector(IT.NoAccountableMiner.selector, id, 3));
        arbitration.openDispute(id, leaves[3], _proofOf(leaves, 3), new bytes32[][](1));
        vm.expectRevert(abi.encodeWithSelector(IT.NoAccountableMiner.selector, id, 3));
        arbitration.openDispute(id, leaves[3], _proofOf(leaves, 3), madeUp);
        uint256 d = arbitration.openDispute(id, leaves[0], _proofOf(leaves, 0), _servedProofs(leaves, 0));
        vm.stopPrank();
        assertEq(
            arbitration.pipelineOf(d), _pair(miners[0], miners[1]), "only the miners who signed the line"
        );
        _decide(d, AT_FAULT);

        uint256 reward = 2 * STAKE_LOCK / 10;
        assertEq(_free(miners[3]), MINER_STAKE, "the spare keeps its whole stake");
        assertEq(_locked(miners[3]), 0);
        assertEq(_free(miners[2]), MINER_STAKE, "a miner of other lines is unlocked");
        assertEq(_free(miners[0]), MINER_STAKE - STAKE_LOCK);
        assertEq(_free(miners[1]), MINER_STAKE - STAKE_LOCK);
        assertEq(escrow.balanceOf(alice), MAX_PRICE + DISPUTE_BOND, "refund and bond: a slash is no party's");
        assertEq(
            escrow.auditPool(),
            2 * STAKE_LOCK - reward + reward % arbitration.roundOf(d, 0).seatsDrawn,
            "the slashes' rest, dust"
        );
        assertEq(escrow.balanceOf(miners[3]), 0);
        _assertEscrowSolvent();
    }

    /// @dev The owner hands in a made-up served proof for the spare named on a line: the spare still is no party
    /// to the dispute (it cannot appeal and is not slashed), and only the line's real miners answer for it.
    function test_attack_madeUpServedProofBindsNoOne() public {
        honest = _newVerifiers("juror", 12, 1);
        (uint256 id, ResultLeaf.Leaf[] memory leaves) = _framingTask();
        bytes32[][] memory served = _servedProofs(leaves, 0);
        served[2] = _proofOf(leaves, 0); // a proof of something else, for the spare
        vm.prank(alice);
        uint256 d = arbitration.openDispute(id, leaves[0], _proofOf(leaves, 0), served);
        assertEq(arbitration.pipelineOf(d), _pair(miners[0], miners[1]));
        _runRound(d, AT_FAULT);
        vm.prank(miners[3]);
        vm.expectRevert(abi.encodeWithSelector(IA.NotAParty.selector, d, miners[3]));
        arbitration.appeal(d);
        _warpPastAppeal(d);
        arbitration.resolve(d);
        assertEq(_free(miners[3]), MINER_STAKE);
        assertEq(_locked(miners[3]), 0);
        assertEq(_free(miners[0]), MINER_STAKE - STAKE_LOCK);
        _assertEscrowSolvent();
    }

    // ---- randomness and delay

    /// @dev No one draws in time: round 0 ends undecided at the opener's cost. Convicted miners who appeal and
    /// then never draw gain nothing: the conviction stands and their appeal bond is forfeited.
    function test_attack_delayedDrawFavoursNoOne() public {
        uint256 d = _openDispute(_committedTask(alice), 0);
        (, IA.Round memory round) = _round(d);
        vm.expectRevert(abi.encodeWithSelector(IA.NotResolvable.selector, d, round.drawDeadline));
        arbitration.resolve(d);
        vm.warp(round.drawDeadline);
        vm.roll(round.seedBlock + 1);
        _setSeed(round.seedBlock, keccak256("late"));
        vm.expectRevert(abi.encodeWithSelector(IA.DrawExpired.selector, d, 0));
        arbitration.drawJury(d);
        arbitration.resolve(d);
        assertEq(uint8(_outcomeOf(d)), uint8(IA.DisputeStatus.NoDecision));

        honest = _newVerifiers("honest", 10, 1);
        uint256 id = _committedTask(bob);
        uint256 d2 = _openDispute(id, 1); // [m2], a wrong line
        address[] memory jurors = _runRound(d2, AT_FAULT);
        uint256 appealBond = _appeal(d2, miners[2]);
        (, round) = _round(d2);
        vm.warp(round.drawDeadline);
        arbitration.resolve(d2);
        assertEq(uint8(_outcomeOf(d2)), uint8(IA.DisputeStatus.MinersAtFault));
        uint256 pot = STAKE_LOCK / 10 + appealBond / 10;
        uint256 seats = arbitration.roundOf(d2, 0).seatsDrawn;
        for (uint256 i = 0; i < jurors.length; ++i) {
            assertEq(escrow.balanceOf(jurors[i]), pot / seats * _seats(d2, 0, jurors[i]));
        }
        assertEq(
            escrow.balanceOf(bob),
            MAX_PRICE + DISPUTE_BOND + appealBond * 9 / 10,
            "refund, bond, forfeited appeal bond less reward (the slash is no party's)"
        );
        _assertEscrowSolvent();
    }

    /// @dev Registering, even with a huge stake, after the block a round opened in (once its seed is known, say)
    /// gives no chance to sit on it: the draw reads the sortition as it stood at the end of that block.
    function test_attack_lateRegistrationCannotBeDrawn() public {
        uint256 d = _openDispute(_committedTask(alice), 0);
        vm.roll(arbitration.roundOf(d, 0).seedBlock + 1);
        address whale = makeAddr("whale");
        _registerVerifier(whale, 1_000 * MIN_VERIFIER_STAKE);
        address[] memory jurors = _drawJury(d);
        assertFalse(_in(jurors, whale));
        assertEq(arbitration.roundOf(d, 0).weightTotal, VERIFIER_COUNT);
    }

    // ---- money

    /// @dev Every juror stays silent: the dispute ends undecided; the owner loses the fee to the miners of the
    /// line, the silent jurors lose half their seats' stake to the audit pool, the task settles as committed.
    function test_attack_undecidedDisputeCostsOpener() public {
        uint256 d = _openDispute(_committedTask(alice), 0); // [m0, m1]
        address[] memory jurors = _runRound(d, IA.Vote.None);
        _warpPastAppeal(d);
        arbitration.resolve(d);
        assertEq(uint8(_outcomeOf(d)), uint8(IA.DisputeStatus.NoDecision));
        uint256 fee = DISPUTE_BOND * NO_DECISION_FEE_BPS / 10_000;
        assertEq(escrow.balanceOf(alice), REFUND + DISPUTE_BOND - fee);
        assertEq(escrow.balanceOf(miners[0]), SHARE_0 + fee / 2);
        assertEq(escrow.balanceOf(miners[1]), SHARE + fee / 2);
        uint256 pool;
        for (uint256 i = 0; i < jurors.length; ++i) {
            // half a seat stake per seat, but never more than the juror's stake (one seat's here)
            uint256 lost = Math.min(_seats(d, 0, jurors[i]) * SEAT_PENALTY, MIN_VERIFIER_STAKE);
            assertEq(_stake(jurors[i]), MIN_VERIFIER_STAKE - lost);
            pool += lost;
        }
        assertEq(escrow.auditPool(), pool);
        _assertMinersWhole();
        _assertEscrowSolvent();
    }

    /// @dev A token that keeps a fee on every transfer would leave the escrow and the registries owing more than
    /// they hold: every deposit must arrive whole.
    function test_attack_feeOnTransferTokenRefused() public {
        FeeOnTransferToken fee = new FeeOnTransferToken();
        PaymentEscrow e = new PaymentEscrow(IERC20(address(fee)), admin);
        bytes32 role = e.TASK_MANAGER_ROLE();
        vm.prank(admin); // a fresh escrow, not the deployment's
        e.grantRole(role, address(this));
        fee.mint(alice, 100e6);
        vm.prank(alice);
        fee.approve(address(e), 100e6);
        vm.expectRevert(abi.encodeWithSelector(IE.TransferShortfall.selector, 100e6, 99e6));
        e.depositEscrow(1, alice, 100e6);

        VerifierRegistry v = new VerifierRegistry(IERC20(address(fee)), address(e), admin, 1e6, 3 days);
        vm.prank(alice);
        fee.approve(address(v), 100e6);
        vm.prank(alice);
        vm.expectRevert(abi.encodeWithSelector(IV.TransferShortfall.selector, 100e6, 99e6));
        v.register(100e6, _models(MODEL));

        GPURegistry g = new GPURegistry(IERC20(address(fee)), admin, 1e6, 1 days);
        vm.prank(alice);
        fee.approve(address(g), 100e6);
        vm.prank(alice);
        vm.expectRevert(abi.encodeWithSelector(IG.TransferShortfall.selector, 100e6, 99e6));
        g.register(_profile(alice), 100e6);
    }

    /// @dev The admin raises the bond, the penalty and the jury size while a dispute runs: it keeps its terms.
    function test_attack_configChangeDoesNotTouchOpenDispute() public {
        uint256 d = _openDispute(_committedTask(alice), 0);
        IA.Terms memory before = arbitration.getDispute(d).terms;
        IA.Config memory c = arbitration.config();
        (c.disputeBond, c.jurorPenaltyBps, c.baseJury, c.votingPeriod) = (50e6, 10_000, 15, 1 hours);
        vm.prank(governor);
        arbitration.setConfig(c);
        assertEq(abi.encode(arbitration.getDispute(d).terms), abi.encode(before));
        assertEq(arbitration.getDispute(d).bond, DISPUTE_BOND);
        _runRound(d, AT_FAULT);
        assertEq(_appeal(d, miners[0]), 2 * DISPUTE_BOND, "the appeal bond follows the dispute's own bond");
        assertEq(arbitration.roundOf(d, 1).seats, 11);
    }

    /// @dev After a task is created, the admin doubles the fee, shortens the challenge window, lowers the value
    /// cap and raises the dispute bond: the task lives on under the terms it was created with; a task created a
    /// second later gets the new ones.
    function test_attack_paramsFixedPerTask() public {
        uint256 id = _assignedTask(alice, 3);
        vm.startPrank(governor);
        tasks.setCoordinatorFee(1_000, stranger);
        tasks.setChallengeWindow(1 hours);
        tasks.setMaxValueAtRisk(1);
        IA.Config memory c = arbitration.config();
        c.disputeBond = 50e6;
        arbitration.setConfig(c);
        vm.stopPrank();
        _commitLeaves(id, _standardLeaves(id));
        assertEq(tasks.challengeEndsAt(id), block.timestamp + CHALLENGE_WINDOW);
        assertEq(arbitration.configOf(id).disputeBond, DISPUTE_BOND);
        uint256 d = _openDisputeWithBond(id, 0, DISPUTE_BOND);
        assertEq(arbitration.getDispute(d).bond, DISPUTE_BOND);
        _decide(d, CORRECT);
        assertEq(
            escrow.balanceOf(feeRecipient), _fee(PAYMENT), "the fee and recipient of the task's creation"
        );
        assertEq(escrow.balanceOf(stranger), 0);

        vm.warp(block.timestamp + 1);
        uint256 later = _createTask(bob, MAX_PRICE);
        assertEq(tasks.termsOf(later).challengeWindow, 1 hours);
        assertEq(arbitration.configOf(later).disputeBond, 50e6);
        vm.prank(coordinator);
        vm.expectRevert(abi.encodeWithSelector(IT.ValueAtRiskTooHigh.selector, MAX_PRICE + STAKE_LOCK, 1));
        tasks.assignTask(later, _miners(1), STAKE_LOCK, _acceptances(tasks, later, _miners(1), STAKE_LOCK));
    }

    /// @dev Class 10(c): a (timelocked) change of the seat stake reached running tasks, their disputes locking
    /// seats of the stake in force when they opened. Now a task's disputes lock seats of the stake in force when
    /// the task was created; a task created after the change takes the new one.
    function test_attack_seatStakeChangeDoesNotReachRunningTasks() public {
        honest = _newVerifiers("juror", 10, 4);
        uint256 id = _committedTask(alice);
        vm.prank(governor);
        verifierRegistry.setMinStake(3 * MIN_VERIFIER_STAKE);
        assertEq(verifierRegistry.minStakeAt(block.timestamp), MIN_VERIFIER_STAKE, "from the next second on");
        vm.warp(block.timestamp + 1);
        uint256 d = _openDispute(id, 0);
        assertEq(arbitration.getDispute(d).terms.seatStake, MIN_VERIFIER_STAKE, "the task's creation's");
        address[] memory jurors = _drawJury(d);
        for (uint256 i = 0; i < jurors.length; ++i) {
            assertEq(
                verifierRegistry.verifierOf(jurors[i]).locked,
                MIN_VERIFIER_STAKE * _seats(d, 0, jurors[i]),
                "seats of the task's seat stake"
            );
        }
        uint256 later = _committedTask(bob);
        uint256 d2 = _openDispute(later, 0);
        assertEq(
            arbitration.getDispute(d2).terms.seatStake, 3 * MIN_VERIFIER_STAKE, "a later task's: the new one"
        );
    }

    function _openDisputeWithBond(uint256 id, uint256 line, uint256 bond) internal returns (uint256) {
        ResultLeaf.Leaf[] memory leaves = _standardLeaves(id);
        _fund(alice, address(escrow), bond);
        vm.prank(alice);
        return arbitration.openDispute(id, leaves[line], _proofOf(leaves, line), _servedProofs(leaves, line));
    }

    /// @dev A task whose price and stake locks exceed what a jury is priced to protect cannot be assigned.
    function test_attack_valueAtRiskCapped() public {
        uint256 id = _createTask(alice, uint128(MAX_VALUE_AT_RISK));
        vm.prank(coordinator);
        vm.expectRevert(
            abi.encodeWithSelector(
                IT.ValueAtRiskTooHigh.selector, MAX_VALUE_AT_RISK + 2 * STAKE_LOCK, MAX_VALUE_AT_RISK
            )
        );
        tasks.assignTask(id, _miners(2), STAKE_LOCK, _acceptances(tasks, id, _miners(2), STAKE_LOCK));
    }

    // ---- paying for the tokens served

    /// @dev The coordinator and every miner commit 100,000 output tokens more than the leaves add up to (10 tokens
    /// more pay). Anyone refutes it with one leaf's proof: the sum tree yields the true usage. The owner gets its
    /// whole escrow back and every miner's task lock; no one is paid.
    function test_attack_overstatedUsageIsRefuted() public {
        (uint256 id, ResultLeaf.Leaf[] memory leaves) = _overchargedTask(100_000);
        assertEq(tasks.getTask(id).payment, PAYMENT + 10e6);
        uint256 walletBefore = token.balanceOf(alice);
        uint256 pool = escrow.auditPool();

        vm.expectEmit(address(tasks));
        emit IT.UsageRefuted(id, INPUT_TOKENS, OUTPUT_TOKENS, 3 * STAKE_LOCK);
        vm.prank(makeAddr("anyone"));
        tasks.refuteUsage(id, leaves[1], _proofOf(leaves, 1));

        assertEq(uint8(tasks.getTask(id).status), uint8(IT.TaskStatus.Finalized));
        assertEq(escrow.balanceOf(alice), MAX_PRICE, "the whole escrow back");
        assertEq(escrow.auditPool(), pool + 3 * STAKE_LOCK, "every signer's task lock, to no party");
        assertEq(token.balanceOf(alice), walletBefore, "owed, not pushed");
        for (uint256 i = 0; i < 3; ++i) {
            assertEq(_free(miners[i]), MINER_STAKE - STAKE_LOCK);
            assertEq(_locked(miners[i]), 0);
            assertEq(escrow.balanceOf(miners[i]), 0, "no pay for an overstated usage");
        }
        assertEq(escrow.balanceOf(feeRecipient), 0);
        vm.expectRevert(_wrongStatus(id, IT.TaskStatus.Finalized, IT.TaskStatus.ResultsCommitted));
        tasks.refuteUsage(id, leaves[1], _proofOf(leaves, 1));
        _assertEscrowSolvent();
    }

    /// @dev A true usage cannot be refuted with any leaf, nor with a leaf whose counts were changed or a proof whose
    /// usage words were; the task then pays exactly the usage's price.
    function test_attack_trueUsageCannotBeRefuted() public {
        uint256 id = _committedTask(alice);
        ResultLeaf.Leaf[] memory leaves = _standardLeaves(id);
        for (uint256 i = 0; i < leaves.length; ++i) {
            vm.expectRevert(abi.encodeWithSelector(IT.UsageMatches.selector, id));
            tasks.refuteUsage(id, leaves[i], _proofOf(leaves, i));
        }
        ResultLeaf.Leaf memory padded = leaves[0];
        padded.outputTokens += 1;
        vm.expectRevert(IT.InvalidProof.selector);
        tasks.refuteUsage(id, padded, _proofOf(leaves, 0));
        bytes32[] memory bent = _proofOf(leaves, 0);
        bent[1] = bytes32(uint256(bent[1]) + 1); // the sibling's usage word
        vm.expectRevert(IT.InvalidProof.selector);
        tasks.refuteUsage(id, _standardLeaves(id)[0], bent);
        bent[1] = bytes32(uint256(bent[1]) - 1 + (1 << 128)); // bits above the two counts
        vm.expectRevert(IT.InvalidProof.selector);
        tasks.refuteUsage(id, _standardLeaves(id)[0], bent);

        vm.warp(tasks.challengeEndsAt(id));
        tasks.finalizeTask(id);
        assertEq(escrow.balanceOf(alice), MAX_PRICE - PAYMENT);
        assertEq(escrow.balanceOf(feeRecipient), _fee(PAYMENT));
        for (uint256 i = 0; i < 3; ++i) {
            assertEq(_free(miners[i]), MINER_STAKE, "honest miners keep their stake");
        }
    }

    /// @dev The refutation also ends a task while its line is disputed: the later verdict moves no more money,
    /// and the owner's bond comes back.
    function test_attack_refutationEndsADisputedTask() public {
        honest = _newVerifiers("juror", 12, 1);
        (uint256 id, ResultLeaf.Leaf[] memory leaves) = _overchargedTask(100_000);
        _fund(alice, address(escrow), DISPUTE_BOND);
        vm.prank(alice);
        uint256 d = arbitration.openDispute(id, leaves[0], _proofOf(leaves, 0), _servedProofs(leaves, 0));
        uint256 pool = escrow.auditPool();
        tasks.refuteUsage(id, leaves[2], _proofOf(leaves, 2));
        assertEq(escrow.auditPool(), pool + 3 * STAKE_LOCK, "the locks, to no party");
        _decide(d, AT_FAULT);
        assertEq(uint8(tasks.getTask(id).status), uint8(IT.TaskStatus.Finalized));
        for (uint256 i = 0; i < 3; ++i) {
            assertEq(_free(miners[i]), MINER_STAKE - STAKE_LOCK, "one task lock each, once");
            assertEq(_locked(miners[i]), 0);
        }
        assertEq(escrow.balanceOf(alice), MAX_PRICE + DISPUTE_BOND, "escrow and bond back");
        _assertEscrowSolvent();
    }

    // ---- stake locks need consent

    function _tryAssign(
        uint256 id,
        address[] memory list,
        uint128 lock,
        IT.Acceptance[] memory a,
        bytes memory err
    ) internal {
        vm.prank(coordinator);
        vm.expectRevert(err);
        tasks.assignTask(id, list, lock, a);
    }

    function _assertUnlocked(uint256 id) internal view {
        for (uint256 i = 0; i < 2; ++i) {
            assertEq(_free(miners[i]), MINER_STAKE);
            assertEq(_locked(miners[i]), 0);
        }
        assertEq(uint8(_status(id)), uint8(IT.TaskStatus.Open));
    }

    /// @dev The coordinator tries to lock two miners' stake with no signature, with their acceptance of another
    /// task, and with their acceptance of a smaller lock: every attempt fails and both stakes stay whole and free.
    function test_attack_stakeLockNeedsConsent() public {
        uint256 id = _createTask(alice, MAX_PRICE);
        uint256 other = _createTask(bob, MAX_PRICE);
        address[] memory two = _miners(2);

        IT.Acceptance[] memory none = _acceptances(tasks, id, two, STAKE_LOCK);
        none[1].signature = "";
        _tryAssign(
            id, two, STAKE_LOCK, none, abi.encodeWithSelector(IT.NoConsent.selector, miners[1], address(0))
        );

        IT.Acceptance[] memory forOther = _acceptances(tasks, other, two, STAKE_LOCK);
        vm.prank(coordinator);
        vm.expectPartialRevert(IT.NoConsent.selector);
        tasks.assignTask(id, two, STAKE_LOCK, forOther);

        IT.Acceptance[] memory smaller = _acceptances(tasks, id, two, STAKE_LOCK);
        vm.prank(coordinator);
        vm.expectPartialRevert(IT.NoConsent.selector);
        tasks.assignTask(id, two, 2 * STAKE_LOCK, smaller);
        _assertUnlocked(id);
    }

    /// @dev A sybil miner points its signer at an honest operator's key (the signer miner 1 accepts with) and the
    /// coordinator assigns the sybil with the operator's acceptance of the task: the acceptance names miner 1,
    /// so it is no consent of the sybil's, and the operator never becomes a party to the sybil's task.
    function test_attack_acceptanceOfOneMinerIsNoOtherMinersConsent() public {
        uint256 id = _createTask(alice, MAX_PRICE);
        address sybil = miners[0];
        vm.prank(sybil);
        registry.setSigner(_signer(1));
        address[] memory operatorOnly = new address[](1);
        operatorOnly[0] = miners[1];
        IT.Acceptance[] memory operators = _acceptances(tasks, id, operatorOnly, STAKE_LOCK);
        address[] memory sybilOnly = new address[](1);
        sybilOnly[0] = sybil;
        vm.prank(coordinator);
        vm.expectPartialRevert(IT.NoConsent.selector);
        tasks.assignTask(id, sybilOnly, STAKE_LOCK, operators);
        assertEq(_locked(sybil), 0);
        assertEq(uint8(_status(id)), uint8(IT.TaskStatus.Open));
    }

    /// @dev Consent signed by the miner's own address instead of its registered signer, or used after its expiry,
    /// locks nothing.
    function test_attack_staleOrForeignConsentRefused() public {
        uint256 id = _createTask(alice, MAX_PRICE);
        address[] memory two = _miners(2);
        (address ownerKeyAddress, uint256 ownerKey) = makeAddrAndKey("miner0 own key");
        IT.Acceptance[] memory a = _acceptances(tasks, id, two, STAKE_LOCK);
        bytes memory honest = a[0].signature;
        (uint8 v, bytes32 r, bytes32 sg) =
            vm.sign(ownerKey, _acceptanceDigest(address(tasks), id, miners[0], STAKE_LOCK, a[0].expiry));
        a[0].signature = abi.encodePacked(r, sg, v);
        _tryAssign(
            id, two, STAKE_LOCK, a, abi.encodeWithSelector(IT.NoConsent.selector, miners[0], ownerKeyAddress)
        );

        a[0].signature = honest;
        vm.warp(a[0].expiry + 1);
        _tryAssign(
            id,
            two,
            STAKE_LOCK,
            a,
            abi.encodeWithSelector(IT.AcceptanceExpired.selector, miners[0], a[0].expiry)
        );
        _assertUnlocked(id);
    }

    /// @dev A one-unit task cannot lock more than the minimum stake lock, even with consent: the lock is bounded by
    /// what the task can pay (its maximum price) or the protocol's minimum, whichever is larger.
    function test_attack_tinyTaskCannotLockLargeStake() public {
        uint256 id = _createTask(alice, 1);
        address[] memory one = _miners(1);
        uint128 large = 100 * STAKE_LOCK;
        _tryAssign(
            id,
            one,
            large,
            _acceptances(tasks, id, one, large),
            abi.encodeWithSelector(IT.StakeLockTooHigh.selector, large, MIN_STAKE_LOCK)
        );
        assertEq(_locked(miners[0]), 0);
        _assign(id, one);
        assertEq(_locked(miners[0]), MIN_STAKE_LOCK, "the minimum, with consent");
    }
}
