// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {BaseTest} from "./BaseTest.sol";
import {IArbitration} from "../src/interfaces/IArbitration.sol";
import {IAudits} from "../src/interfaces/IAudits.sol";
import {IPaymentEscrow} from "../src/interfaces/IPaymentEscrow.sol";
import {IVerifierRegistry} from "../src/interfaces/IVerifierRegistry.sol";
import {ResultLeaf} from "../src/libraries/ResultLeaf.sol";

/// @notice Every state change of arbitration and the verifier registry emits its event with exact arguments
/// (the task registry's, the GPU registry's and the escrow's are checked in their own test files; that every
/// state-changing function emits at all is checked over the sources by tests/test_contract_events.py).
contract ArbitrationEventsTest is BaseTest {
    function setUp() public override {
        super.setUp();
        _registerAll();
    }

    /// @dev The leaf's hash as the contracts compute it (from calldata, as they receive it).
    function leafHash(ResultLeaf.Leaf calldata leaf) external pure returns (bytes32) {
        return ResultLeaf.hash(leaf);
    }

    function test_aDisputesLife_emitsOneEventPerStep() public {
        uint256 taskId = _committedTask(alice);
        ResultLeaf.Leaf[] memory leaves = _standardLeaves(taskId);
        _fund(alice, address(escrow), DISPUTE_BOND);
        uint256 disputeId = arbitration.disputeCount() + 1;
        vm.expectEmit(address(arbitration));
        emit IArbitration.DisputeOpened(
            disputeId,
            taskId,
            alice,
            0,
            this.leafHash(leaves[0]),
            uint128(DISPUTE_BOND),
            uint64(block.number + 4)
        );
        vm.prank(alice);
        arbitration.openDispute(taskId, leaves[0], _proofOf(leaves, 0), _servedProofs(leaves, 0));

        IArbitration.Round memory round = arbitration.roundOf(disputeId, 0);
        vm.roll(round.seedBlock + 1);
        _setSeed(round.seedBlock, keccak256("seed"));
        // Seats are drawn by weight whatever is locked: the four one-seat verifiers fill all five.
        vm.expectEmit(address(arbitration));
        emit IArbitration.JuryDrawn(disputeId, 0, round.seats, uint64(block.timestamp + VOTING_PERIOD));
        arbitration.drawJury(disputeId);
        address[] memory jurors = arbitration.jurorsOf(disputeId, 0);

        for (uint256 i = 0; i < jurors.length; ++i) {
            bytes32 commitment = arbitration.voteCommitment(
                disputeId, 0, jurors[i], IArbitration.Vote.MinersAtFault, _salt(jurors[i])
            );
            vm.expectEmit(address(arbitration));
            emit IArbitration.VoteCommitted(disputeId, 0, jurors[i]);
            vm.prank(jurors[i]);
            arbitration.commitVote(disputeId, commitment);
        }
        vm.warp(arbitration.roundOf(disputeId, 0).commitDeadline);
        for (uint256 i = 0; i < jurors.length; ++i) {
            uint16 seats = uint16(_seats(disputeId, 0, jurors[i]));
            vm.expectEmit(address(arbitration));
            emit IArbitration.VoteRevealed(disputeId, 0, jurors[i], IArbitration.Vote.MinersAtFault, seats);
            _revealVote(disputeId, jurors[i], IArbitration.Vote.MinersAtFault);
        }
        _warpPastAppeal(disputeId);

        // Line 0's pipeline (miners 0 and 1) is slashed its lock each; every seat is coherent and shares the
        // jurors' part of the slash.
        uint256 slashed = 2 * STAKE_LOCK;
        uint256 pot = slashed * REWARD_BPS / 10_000;
        uint256 paid = pot / round.seats * round.seats;
        vm.expectEmit(address(arbitration));
        emit IArbitration.DisputeResolved(
            disputeId, IArbitration.DisputeStatus.MinersAtFault, slashed, paid, 0
        );
        arbitration.resolve(disputeId);
    }

    function test_anAppealAndASilentJuror_emitTheirEvents() public {
        uint256 disputeId = _openDispute(_committedTask(alice), 0);
        address[] memory jurors = _drawJury(disputeId);
        IArbitration.Vote[] memory votes = new IArbitration.Vote[](jurors.length);
        for (uint256 i = 1; i < jurors.length; ++i) {
            votes[i] = IArbitration.Vote.MinersAtFault; // jurors[0] stays silent
        }
        _runRoundWith(disputeId, jurors, votes);
        _fund(miners[0], address(escrow), 2 * DISPUTE_BOND);
        vm.expectEmit(address(arbitration));
        emit IArbitration.Appealed(
            disputeId, 1, miners[0], uint128(2 * DISPUTE_BOND), uint64(block.number + 4)
        );
        vm.prank(miners[0]);
        arbitration.appeal(disputeId);

        // Round 1 never drawn: round 0's conviction stands, and the silent seat pays its penalty.
        vm.warp(arbitration.roundOf(disputeId, 1).drawDeadline);
        uint256 penalty = arbitration.getDispute(disputeId).terms.seatStake * PENALTY_BPS / 10_000
            * _seats(disputeId, 0, jurors[0]);
        uint256 stake = verifierRegistry.verifierOf(jurors[0]).stake;
        if (penalty > stake) penalty = stake; // its penalties stop at its stake
        vm.expectEmit(address(arbitration));
        emit IArbitration.JurorSettled(disputeId, jurors[0], penalty, 0);
        arbitration.resolve(disputeId);
    }

    function test_anAudit_emitsItsDrawSealAndOpening() public {
        _setAuditRate(10_000);
        _fund(bob, address(escrow), DISPUTE_BOND);
        vm.expectEmit(address(escrow));
        emit IPaymentEscrow.AuditPoolFunded(bob, DISPUTE_BOND);
        vm.prank(bob);
        audits.fundAuditPool(DISPUTE_BOND);
        uint256 taskId = _committedTask(alice);

        vm.expectEmit(address(audits));
        emit IAudits.AuditDrawn(taskId, block.number + 4, false);
        audits.drawAudit(taskId);
        bytes32 hash = keccak256("the seed block's mix hash");
        _mineSeed(taskId, hash);
        bytes32 seed = keccak256(abi.encode(hash, taskId));
        uint32 line = uint32(uint256(keccak256(abi.encode(seed, uint256(1)))) % 4);
        vm.expectEmit(address(audits));
        emit IAudits.AuditSealed(taskId, seed, true, line);
        audits.sealAudit(taskId);

        ResultLeaf.Leaf[] memory leaves = _standardLeaves(taskId);
        assertGt(leaves[line].pipeline.length, 0, "this seed selects a line some miner served");
        uint256 disputeId = arbitration.disputeCount() + 1;
        vm.expectEmit(address(audits));
        emit IAudits.AuditOpened(disputeId, taskId, verifiers[0], uint128(MIN_VERIFIER_STAKE));
        vm.prank(verifiers[0]);
        audits.openAudit(taskId, leaves[line], _proofOf(leaves, line), _servedProofs(leaves, line));
    }

    function test_aNewConfiguration_isAnnounced() public {
        IArbitration.Config memory c = arbitration.config();
        c.disputeBond = 2 * DISPUTE_BOND;
        vm.expectEmit(address(arbitration));
        emit IArbitration.ConfigChanged(c);
        vm.prank(governor);
        arbitration.setConfig(c);
    }

    function test_aVerifiersLife_emitsOneEventPerStep() public {
        address v = makeAddr("newcomer");
        uint256 stake = 2 * MIN_VERIFIER_STAKE;
        _fund(v, address(verifierRegistry), stake);
        vm.expectEmit(address(verifierRegistry));
        emit IVerifierRegistry.VerifierRegistered(v, stake, 2);
        vm.expectEmit(address(verifierRegistry));
        emit IVerifierRegistry.VerifierModelAdded(v, MODEL, 2);
        vm.prank(v);
        verifierRegistry.register(stake, _models(MODEL));

        vm.expectEmit(address(verifierRegistry));
        emit IVerifierRegistry.VerifierExitRequested(v, block.timestamp + VERIFIER_UNBONDING);
        vm.prank(v);
        verifierRegistry.requestExit();

        vm.warp(block.timestamp + VERIFIER_UNBONDING);
        vm.expectEmit(address(verifierRegistry));
        emit IVerifierRegistry.VerifierStakeWithdrawn(v, stake);
        vm.prank(v);
        verifierRegistry.withdraw();

        vm.expectEmit(address(verifierRegistry));
        emit IVerifierRegistry.MinStakeChanged(3 * MIN_VERIFIER_STAKE);
        vm.prank(governor);
        verifierRegistry.setMinStake(3 * MIN_VERIFIER_STAKE);

        vm.expectEmit(address(verifierRegistry));
        emit IVerifierRegistry.UnbondingPeriodChanged(2 * VERIFIER_UNBONDING);
        vm.prank(governor);
        verifierRegistry.setUnbondingPeriod(2 * VERIFIER_UNBONDING);
    }
}
