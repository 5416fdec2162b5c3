// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {ResultLeaf} from "../libraries/ResultLeaf.sol";

/// @title IArbitration
/// @notice Disputes over single result leaves, decided by juries drawn at random from the staked verifiers,
/// weighted by stake. A dispute is opened by the task owner, or by a verifier as the random audit of a task the
/// chain selected (through `IAudits`; bond from the audit pool), and anyone may add the miners accountable for its
/// leaf that its opener left out. Each round: a future block's random value is fixed at opening as the seed;
/// anyone draws the jury from it; jurors commit, then reveal; the losing side may appeal to a larger jury for a
/// larger bond. The last round decides; jurors of every round who voted against the final outcome, or did not
/// reveal, lose part of their seat stake to the coherent ones.
interface IArbitration {
    /// @notice Open: rounds run. MinersAtFault: the leaf was wrong, its pipeline was slashed. MinersCorrect: the
    /// leaf was right. NoDecision: the last round had no majority, or its jury was never drawn; results stand.
    enum DisputeStatus {
        None,
        Open,
        MinersAtFault,
        MinersCorrect,
        NoDecision
    }

    enum Vote {
        None,
        MinersCorrect,
        MinersAtFault
    }

    /// @notice `challenger` is the task owner (refunded if the miners were at fault); `opener` is
    /// whoever opened it (the owner, or for an audit the verifier). `bond` is round 0's bond (from the audit pool
    /// when `audit`). `modelId` is the task's model: its jurors are drawn from that model's verifier pool. The terms
    /// below are fixed when the dispute opens.
    struct Dispute {
        uint256 taskId;
        address challenger;
        address opener;
        DisputeStatus status;
        bool audit;
        uint8 round;
        uint32 requestIndex;
        uint64 openedAtBlock;
        uint64 openedAt;
        uint128 bond;
        bytes32 leafHash;
        bytes32 modelId;
        Terms terms;
    }

    /// @notice What a dispute runs under, copied from the configuration when it opens.
    struct Terms {
        uint32 phase; // seconds for each of: drawing, committing, revealing, appealing
        uint16 rewardBps; // share of slashed stake or a forfeited bond paid to coherent jurors
        uint16 penaltyBps; // share of a seat's stake an incoherent or silent juror loses
        uint16 noDecisionFeeBps; // share of the opener's bond kept when the dispute ends undecided
        uint16 baseJury; // seats in round 0; round r has 2^r * (baseJury + 1) - 1
        uint128 seatStake; // stake locked per seat: the verifier registry's minimum stake when the task was created
    }

    /// @notice One round. `seedBlock`: the future block whose random value (`IRandomness`) seeds the draw; the
    /// draw reads the sortition as it stood when the round opened (later registrations and exits change nothing
    /// of it). `weightTotal`: the model pool's total then. Deadlines are 0 until the jury is drawn.
    /// `bond` was posted by `bondPayer` (for round 0 of an audit: the audit pool, `bondPayer` = 0) on the
    /// challenger's side or not (`challengerSide`).
    struct Round {
        uint64 seedBlock;
        uint64 drawDeadline;
        uint64 commitDeadline;
        uint64 revealDeadline;
        uint64 appealDeadline;
        uint16 seats;
        uint16 seatsDrawn;
        uint16 votesCorrect;
        uint16 votesAtFault;
        uint128 weightTotal;
        uint128 bond;
        address bondPayer;
        bool challengerSide;
    }

    /// @notice A juror's place in one round: its seats (votes), its commitment and, once revealed, its vote.
    struct Juror {
        uint16 seats;
        Vote vote;
        bytes32 commitment;
    }

    error ZeroAddress();
    error ZeroBond();
    error NotTaskOwner(uint256 taskId, address caller);
    error DisputeAlreadyOpen(uint256 taskId, uint256 disputeId);
    error UnknownDispute(uint256 disputeId);
    error DisputeNotOpen(uint256 disputeId);
    error OwnerWindowClosed(uint256 taskId, uint256 endedAt);
    error RewardTooHigh(uint256 bps, uint256 maximum);
    error PenaltyOutOfRange(uint256 bps);
    error FeeTooHigh(uint256 bps, uint256 maximum);
    error JurySizeOutOfRange(uint256 seats);
    error PhaseTooShort(uint256 period, uint256 minimum);
    error PhaseTooLong(uint256 period, uint256 maximum);
    error UnbondingTooShort(uint256 unbondingPeriod, uint256 exposure);

    error JuryNotDrawable(uint256 disputeId, uint256 readyAtBlock);
    error JuryAlreadyDrawn(uint256 disputeId, uint8 round);
    error DrawExpired(uint256 disputeId, uint8 round);
    error NotJuror(uint256 disputeId, uint8 round, address account);
    error NotCommitPhase(uint256 disputeId, uint8 round);
    error NotRevealPhase(uint256 disputeId, uint8 round);
    error AlreadyCommitted(uint256 disputeId, address juror);
    error AlreadyRevealed(uint256 disputeId, address juror);
    error CommitmentMismatch(uint256 disputeId, address juror);
    error InvalidVote();
    error NotAppealable(uint256 disputeId, uint8 round);
    error NotAParty(uint256 disputeId, address account);
    error AppealByWinner(uint256 disputeId, address account);
    error NotResolvable(uint256 disputeId, uint256 atTime);

    error NotVerifierOfModel(address account, bytes32 modelId);
    error AuditorIsAParty(uint256 taskId, address auditor);

    error AuditRateTooHigh(uint256 bps, uint256 maximum);
    error NotDisputedLeaf(uint256 disputeId, bytes32 leafHash);

    event DisputeOpened(
        uint256 indexed disputeId,
        uint256 indexed taskId,
        address indexed challenger,
        uint32 requestIndex,
        bytes32 leafHash,
        uint128 bond,
        uint64 seedBlock
    );
    event JuryDrawn(uint256 indexed disputeId, uint8 round, uint16 seats, uint64 commitDeadline);
    /// @notice An appeal round drew fewer seats than it has: it ended undrawn (the previous outcome stands).
    event AppealJuryShort(uint256 indexed disputeId, uint8 round, uint16 drawn, uint16 seats);
    event VoteCommitted(uint256 indexed disputeId, uint8 round, address indexed juror);
    event VoteRevealed(
        uint256 indexed disputeId, uint8 round, address indexed juror, Vote vote, uint16 seats
    );
    event Appealed(
        uint256 indexed disputeId, uint8 round, address indexed appellant, uint128 bond, uint64 seedBlock
    );
    event JurorSettled(uint256 indexed disputeId, address indexed juror, uint256 penalty, uint256 reward);
    event DisputeResolved(
        uint256 indexed disputeId,
        DisputeStatus outcome,
        uint256 slashed,
        uint256 jurorRewards,
        uint256 penalties
    );
    event ConfigChanged(Config config);

    event MinerJoined(uint256 indexed disputeId, address indexed miner, address indexed by);

    /// @notice The arbitration configuration; a dispute copies its `Terms` from it when it opens.
    struct Config {
        uint256 disputeBond;
        uint256 votingPeriod; // seconds per phase
        uint256 verifierRewardBps;
        uint256 auditRateBps;
        uint256 jurorPenaltyBps;
        uint256 noDecisionFeeBps;
        uint256 baseJury;
        uint256 auditRewardPerDay; // most the pool's money (audit bonds, convictions' slashes) pays jurors a day
    }

    /// @notice The task owner disputes one leaf: `proof` places it in the committed results, `servedProofs[k]` in
    /// the served root of its k-th pipeline miner (those it proves are the miners held to account).
    function openDispute(
        uint256 taskId,
        ResultLeaf.Leaf calldata leaf,
        bytes32[] calldata proof,
        bytes32[][] calldata servedProofs
    ) external returns (uint256 disputeId);
    /// @notice Draws the current round's jury from its seed block's random value; anyone, once it is proven.
    function drawJury(uint256 disputeId) external;
    /// @notice A juror's sealed vote: `voteCommitment(disputeId, round, juror, vote, salt)`.
    function commitVote(uint256 disputeId, bytes32 commitment) external;
    /// @notice Opens a sealed vote: `choice` and `salt` must hash to the juror's commitment of this round.
    function revealVote(uint256 disputeId, Vote choice, bytes32 salt) external;
    /// @notice A party on the losing side of the current round asks for a larger jury, posting a larger bond.
    function appeal(uint256 disputeId) external;
    /// @notice Settles a dispute whose last phase has ended: bonds, juror stakes and, if the miners were at
    /// fault, their slashing.
    function resolve(uint256 disputeId) external returns (DisputeStatus outcome);

    /// @notice The audits contract opens a dispute, as the random audit of a selected task, over its selected line
    /// on behalf of `opener` (an active verifier that is not a party); the bond comes from the audit pool.
    function openAudit(
        uint256 taskId,
        address opener,
        ResultLeaf.Leaf calldata leaf,
        bytes32[] calldata proof,
        bytes32[][] calldata servedProofs
    ) external returns (uint256 disputeId);
    /// @notice Anyone adds to an open dispute the miners accountable for its leaf that its opener did not prove:
    /// `servedProofs[k]` places the leaf in the served root of its k-th pipeline miner.
    function joinDispute(
        uint256 disputeId,
        ResultLeaf.Leaf calldata leaf,
        bytes32[] calldata proof,
        bytes32[][] calldata servedProofs
    ) external;

    /// @notice The commitment a juror seals: the hash of the dispute, round, juror, vote and salt.
    function voteCommitment(uint256 disputeId, uint8 round, address juror, Vote choice, bytes32 salt)
        external
        pure
        returns (bytes32);
    /// @notice A dispute as stored: task, leaf, parties, bond, round and status.
    function getDispute(uint256 disputeId) external view returns (Dispute memory);
    /// @notice Round `round` of a dispute: its jury size, deadlines and vote tallies.
    function roundOf(uint256 disputeId, uint8 round) external view returns (Round memory);
    /// @notice The jurors drawn for round `round` of a dispute, seat by seat.
    function jurorsOf(uint256 disputeId, uint8 round) external view returns (address[] memory);
    /// @notice One juror's seat in round `round` of a dispute: its commitment, revealed vote and locked
    /// stake.
    function jurorOf(uint256 disputeId, uint8 round, address account) external view returns (Juror memory);
    /// @notice The pipeline miners a dispute holds to account (those whose served root proves the leaf).
    function pipelineOf(uint256 disputeId) external view returns (address[] memory);
    /// @notice The task owner's dispute of the task, 0 if none (an owner disputes at most one line per task).
    function disputeOfTask(uint256 taskId) external view returns (uint256);
    /// @notice The configuration a task lives under: the one in force when it was created.
    function configOf(uint256 taskId) external view returns (Config memory);
}
