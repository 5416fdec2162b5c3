// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {SafeCast} from "@openzeppelin/contracts/utils/math/SafeCast.sol";
import {IArbitration} from "../interfaces/IArbitration.sol";
import {PayoutLedger} from "../libraries/PayoutLedger.sol";
import {ArbitrationBase} from "./ArbitrationBase.sol";
import {SEED_DELAY_BLOCKS} from "../interfaces/IRandomness.sol";

/// @title Juries
/// @notice The jury of each dispute round: drawn at random, weighted by stake, voting by commit and reveal.
///
/// The random value (`IRandomness`: `prevrandao`) of a block a few blocks after a round opens (unknown when it
/// opens, and not the choice of any one block's builder) seeds its draw, and the candidates are the verifiers
/// of the task's model (its pool in the verifier registry) as they stood when it opened. Anyone draws the jury
/// once that value is proven: the verifier registry draws `seats` seats (`IVerifierRegistry.drawSeats`), each
/// landing by weight as the pool stood at the round's opening, whatever other rounds have locked, the parties to
/// the dispute (task owner, opener, coordinator, the task's miners and their signers) cut out of the draw. Each
/// seat locks `seatStake` of the juror's stake. An appeal round drawn short of its seats ends as undrawn. Jurors commit `voteCommitment(...)`, then reveal; a side wins a round with
/// more revealed seats. At resolution, jurors of every round who voted against the outcome or did not reveal
/// lose `penaltyBps` of their seats' stake, which goes, with the reward, to the coherent seats.
abstract contract Juries is ArbitrationBase {
    using SafeCast for uint256;
    using PayoutLedger for PayoutLedger.Ledger;

    mapping(uint256 disputeId => Round[]) internal _rounds;
    mapping(uint256 disputeId => mapping(uint8 round => address[])) private _jurors;
    mapping(uint256 disputeId => mapping(uint8 round => mapping(address => Juror))) private _seats;

    /// @inheritdoc IArbitration
    function drawJury(uint256 disputeId) external {
        Dispute storage dispute = _open(disputeId);
        uint8 r = dispute.round;
        Round storage round = _rounds[disputeId][r];
        if (round.commitDeadline != 0) revert JuryAlreadyDrawn(disputeId, r);
        if (_drawExpired(round)) revert DrawExpired(disputeId, r);
        bytes32 value = randomness.valueOf(round.seedBlock);
        if (value == 0) revert JuryNotDrawable(disputeId, round.seedBlock + 1);
        uint256 seed = uint256(keccak256(abi.encode(value, disputeId, r)));
        uint256 seatStake = dispute.terms.seatStake;
        uint256 drawn =
            _drawSeats(disputeId, r, seed, dispute.modelId, round, _parties(disputeId, dispute), seatStake);
        if (r > 0 && drawn < round.seats) {
            // An appeal drawn short of its seats fails: the seats go back, and the round ends at once as one never
            // drawn (the previous outcome stands; the appellant's bond pays for it).
            _releaseShortRound(disputeId, r, seatStake);
            round.drawDeadline = uint64(block.timestamp);
            emit AppealJuryShort(disputeId, r, uint16(drawn), round.seats);
            return;
        }
        // A round 0 nobody could sit on (all the pool's weight a party's, or none) ends at once, undecided:
        // there is no vote to wait for, and its opener is charged nothing for it (see `_settleBond`).
        uint64 phase = drawn == 0 ? 0 : dispute.terms.phase;
        round.seatsDrawn = uint16(drawn);
        round.commitDeadline = (block.timestamp + phase).toUint64();
        round.revealDeadline = round.commitDeadline + phase;
        round.appealDeadline = round.revealDeadline + phase;
        emit JuryDrawn(disputeId, r, uint16(drawn), round.commitDeadline);
    }

    /// @inheritdoc IArbitration
    function commitVote(uint256 disputeId, bytes32 commitment) external {
        Dispute storage dispute = _open(disputeId);
        uint8 r = dispute.round;
        Round storage round = _rounds[disputeId][r];
        if (round.commitDeadline == 0 || block.timestamp >= round.commitDeadline) {
            revert NotCommitPhase(disputeId, r);
        }
        Juror storage juror = _juror(disputeId, r, msg.sender);
        if (juror.commitment != 0) revert AlreadyCommitted(disputeId, msg.sender);
        if (commitment == 0) revert InvalidVote();
        juror.commitment = commitment;
        emit VoteCommitted(disputeId, r, msg.sender);
    }

    /// @inheritdoc IArbitration
    /// @dev Only after the commit phase, so no revealed vote can be copied by a juror still to commit.
    function revealVote(uint256 disputeId, Vote choice, bytes32 salt) external {
        Dispute storage dispute = _open(disputeId);
        uint8 r = dispute.round;
        Round storage round = _rounds[disputeId][r];
        if (
            round.commitDeadline == 0 || block.timestamp < round.commitDeadline
                || block.timestamp >= round.revealDeadline
        ) {
            revert NotRevealPhase(disputeId, r);
        }
        Juror storage juror = _juror(disputeId, r, msg.sender);
        if (juror.vote != Vote.None) revert AlreadyRevealed(disputeId, msg.sender);
        if (choice == Vote.None) revert InvalidVote();
        if (voteCommitment(disputeId, r, msg.sender, choice, salt) != juror.commitment) {
            revert CommitmentMismatch(disputeId, msg.sender);
        }
        juror.vote = choice;
        if (choice == Vote.MinersAtFault) round.votesAtFault += juror.seats;
        else round.votesCorrect += juror.seats;
        emit VoteRevealed(disputeId, r, msg.sender, choice, juror.seats);
    }

    /// @inheritdoc IArbitration
    function voteCommitment(uint256 disputeId, uint8 round, address juror, Vote choice, bytes32 salt)
        public
        pure
        returns (bytes32)
    {
        return keccak256(abi.encode(disputeId, round, juror, choice, salt));
    }

    /// @inheritdoc IArbitration
    function roundOf(uint256 disputeId, uint8 round) external view returns (Round memory) {
        return _rounds[disputeId][round];
    }

    /// @inheritdoc IArbitration
    function jurorsOf(uint256 disputeId, uint8 round) external view returns (address[] memory) {
        return _jurors[disputeId][round];
    }

    /// @inheritdoc IArbitration
    function jurorOf(uint256 disputeId, uint8 round, address account) external view returns (Juror memory) {
        return _seats[disputeId][round][account];
    }

    /// @dev The open dispute `disputeId`; reverts if there is none.
    function _open(uint256 disputeId) internal view virtual returns (Dispute storage);

    /// @dev Everyone who may not sit on the dispute's jury.
    function _parties(uint256 disputeId, Dispute storage dispute)
        internal
        view
        virtual
        returns (address[] memory);

    /// @dev Round `r` has `2^r * (baseJury + 1) - 1` seats; its seed is the random value of the block
    /// SEED_DELAY_BLOCKS from now, and only verifiers in the model's pool by now can sit on it.
    function _openRound(
        uint256 disputeId,
        Dispute storage dispute,
        uint8 r,
        uint128 bond,
        address bondPayer,
        bool challengerSide
    ) internal returns (uint64 seedBlock) {
        seedBlock = (block.number + SEED_DELAY_BLOCKS).toUint64();
        Terms memory terms = dispute.terms;
        _rounds[disputeId].push(
            Round({
                seedBlock: seedBlock,
                drawDeadline: (block.timestamp + terms.phase).toUint64(),
                commitDeadline: 0,
                revealDeadline: 0,
                appealDeadline: 0,
                seats: uint16(((uint256(terms.baseJury) + 1) << r) - 1),
                seatsDrawn: 0,
                votesCorrect: 0,
                votesAtFault: 0,
                weightTotal: verifiers.totalWeight(dispute.modelId).toUint128(),
                bond: bond,
                bondPayer: bondPayer,
                challengerSide: challengerSide
            })
        );
    }

    /// @dev Unlocks every seat; an incoherent or silent seat loses `penaltyBps` of its stake (the verifier
    /// registry sends it to the escrow). Coherent: the outcome's vote, or any revealed vote when there was no decision.
    function _settleJurors(
        uint256 disputeId,
        Dispute storage dispute,
        uint256 rounds,
        DisputeStatus outcome,
        PayoutLedger.Ledger memory ledger
    ) internal {
        uint256 seatStake = dispute.terms.seatStake;
        uint256 seatPenalty = seatStake * dispute.terms.penaltyBps / BPS;
        for (uint8 r = 0; r < rounds; ++r) {
            address[] storage jurors = _jurors[disputeId][r];
            for (uint256 i = 0; i < jurors.length; ++i) {
                Juror storage juror = _seats[disputeId][r][jurors[i]];
                bool coherent = _coherent(juror.vote, outcome);
                // What the registry took: a verifier's penalties stop at its stake.
                uint256 penalty = verifiers.releaseSeat(
                    jurors[i], seatStake * juror.seats, coherent ? 0 : seatPenalty * juror.seats
                );
                if (coherent) {
                    ledger.coherentSeats += juror.seats;
                } else {
                    ledger.penalties += penalty;
                    emit JurorSettled(disputeId, jurors[i], penalty, 0);
                }
            }
        }
        ledger.jurorPot += ledger.penalties;
    }

    /// @dev The juror pot shared by coherent seats; rounding dust (or the whole pot, with no coherent seat) stays
    /// in the float for the audit pool. Returns what the jurors got.
    function _payJurors(
        uint256 disputeId,
        uint256 rounds,
        DisputeStatus outcome,
        PayoutLedger.Ledger memory ledger
    ) internal returns (uint256 paid) {
        if (ledger.coherentSeats == 0) return 0;
        uint256 perSeat = ledger.jurorPot / ledger.coherentSeats;
        for (uint8 r = 0; r < rounds; ++r) {
            address[] storage jurors = _jurors[disputeId][r];
            for (uint256 i = 0; i < jurors.length; ++i) {
                Juror storage juror = _seats[disputeId][r][jurors[i]];
                if (!_coherent(juror.vote, outcome)) continue;
                uint256 reward = perSeat * juror.seats;
                ledger.pay(jurors[i], reward);
                paid += reward;
                emit JurorSettled(disputeId, jurors[i], 0, reward);
            }
        }
    }

    /// @dev Jurors (distinct per round) of the dispute's first `rounds` rounds: the payees a resolution may add.
    function _jurorCount(uint256 disputeId, uint256 rounds) internal view returns (uint256 count) {
        for (uint8 r = 0; r < rounds; ++r) {
            count += _jurors[disputeId][r].length;
        }
    }

    /// @dev A round's jury can no longer be drawn: its drawing phase is over, or its seed can no longer become
    /// known.
    function _drawExpired(Round storage round) internal view returns (bool) {
        return block.timestamp >= round.drawDeadline || randomness.isExpired(round.seedBlock);
    }

    /// @dev The side with more revealed seats; NoDecision on a tie (or no reveal).
    function _outcome(Round storage round) internal view returns (DisputeStatus) {
        if (round.votesAtFault > round.votesCorrect) return DisputeStatus.MinersAtFault;
        if (round.votesCorrect > round.votesAtFault) return DisputeStatus.MinersCorrect;
        return DisputeStatus.NoDecision;
    }

    /// @dev Seats the jurors the verifier registry draws for round `r` (`drawSeats`: the parties cut out, each
    /// seat's stake locked); returns how many seats it filled.
    function _drawSeats(
        uint256 disputeId,
        uint8 r,
        uint256 seed,
        bytes32 model,
        Round storage round,
        address[] memory parties,
        uint256 seatStake
    ) private returns (uint256) {
        // The sortition as it stood when the round opened (SEED_DELAY_BLOCKS before its seed block).
        uint256 openedAt = round.seedBlock - SEED_DELAY_BLOCKS;
        address[] memory drawn = verifiers.drawSeats(model, seed, openedAt, round.seats, seatStake, parties);
        for (uint256 i = 0; i < drawn.length; ++i) {
            Juror storage juror = _seats[disputeId][r][drawn[i]];
            if (juror.seats == 0) _jurors[disputeId][r].push(drawn[i]);
            ++juror.seats;
        }
        return drawn.length;
    }

    /// @dev Unlocks every seat drawn in round `r` and forgets its jurors (none of them sat).
    function _releaseShortRound(uint256 disputeId, uint8 r, uint256 seatStake) private {
        address[] storage jurors = _jurors[disputeId][r];
        for (uint256 i = 0; i < jurors.length; ++i) {
            verifiers.releaseSeat(jurors[i], seatStake * _seats[disputeId][r][jurors[i]].seats, 0);
            delete _seats[disputeId][r][jurors[i]];
        }
        delete _jurors[disputeId][r];
    }

    function _juror(uint256 disputeId, uint8 r, address account) private view returns (Juror storage juror) {
        juror = _seats[disputeId][r][account];
        if (juror.seats == 0) revert NotJuror(disputeId, r, account);
    }

    function _coherent(Vote vote, DisputeStatus outcome) private pure returns (bool) {
        if (outcome == DisputeStatus.NoDecision) return vote != Vote.None;
        return
            outcome == DisputeStatus.MinersAtFault ? vote == Vote.MinersAtFault : vote == Vote.MinersCorrect;
    }
}
