"""Typed views of on-chain records, decoded from the tuples web3 returns."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum


class DisputeStatus(IntEnum):
    """Mirrors IArbitration.DisputeStatus."""

    NONE = 0
    OPEN = 1
    MINERS_AT_FAULT = 2
    MINERS_CORRECT = 3
    NO_DECISION = 4


class Vote(IntEnum):
    NONE = 0
    MINERS_CORRECT = 1
    MINERS_AT_FAULT = 2


@dataclass(frozen=True)
class MinerProfile:
    signer: str
    gpu_class: bytes
    vram_gb: int
    gpu_count: int
    region: bytes
    price_floor: int
    endpoint: str
    model_ids: tuple[bytes, ...]


@dataclass(frozen=True)
class Stake:
    free: int
    locked: int
    unbonding: int
    unbonding_release_at: int

    @property
    def total(self) -> int:
        return self.free + self.locked + self.unbonding


@dataclass(frozen=True)
class ArbitrationConfig:
    """Mirrors IArbitration.Config: the dispute bond, seconds per phase, the jurors' reward share, the audit
    rate, a silent or incoherent seat's penalty and an undecided dispute's fee (basis points), round 0's seats
    and the most the audit pool pays jurors per day."""

    dispute_bond: int
    voting_period: int
    verifier_reward_bps: int
    audit_rate_bps: int
    juror_penalty_bps: int
    no_decision_fee_bps: int
    base_jury: int
    audit_reward_per_day: int


@dataclass(frozen=True)
class Terms:
    """What a dispute runs under, fixed when it opened: seconds per phase (draw, commit, reveal, appeal), the
    coherent jurors' share of a slash or forfeited bond, a silent or incoherent seat's penalty, the fee an
    undecided dispute keeps from the owner's bond (all in basis points), round 0's seats and the stake locked
    per seat."""

    phase: int
    reward_bps: int
    penalty_bps: int
    no_decision_fee_bps: int
    base_jury: int
    seat_stake: int


@dataclass(frozen=True)
class Dispute:
    """`challenger` is the task owner (for an audit too, which it did not pay for); `opener` opened it (the
    owner, or the auditing verifier); `round` is the current round (0 to 2); `bond` is round 0's; `model_id`
    the task's model, whose verifier pool its juries are drawn from."""

    task_id: int
    challenger: str
    opener: str
    status: DisputeStatus
    audit: bool
    round: int
    request_index: int
    opened_at_block: int
    opened_at: int
    bond: int
    leaf_hash: bytes
    model_id: bytes
    terms: Terms


LAST_ROUND = 2  # rounds 0, 1, 2 (Arbitration.MAX_ROUNDS - 1): the last cannot be appealed


class Phase(IntEnum):
    """Where a round stands at a given time."""

    DRAWING = 0
    COMMIT = 1
    REVEAL = 2
    APPEAL = 3
    OVER = 4


@dataclass(frozen=True)
class Round:
    """One round of a dispute. `seed_block`: the block whose random value (`prevrandao`) seeds the draw;
    deadlines are 0 until the jury is drawn; votes count seats. `bond` was posted by `bond_payer` (the zero
    address: the audit pool)."""

    seed_block: int
    draw_deadline: int
    commit_deadline: int
    reveal_deadline: int
    appeal_deadline: int
    seats: int
    seats_drawn: int
    votes_correct: int
    votes_at_fault: int
    weight_total: int
    bond: int
    bond_payer: str
    challenger_side: bool

    @property
    def drawn(self) -> bool:
        return self.commit_deadline != 0

    def phase(self, now: int) -> Phase:
        """The phase at chain time `now` (DRAWING until drawn, then each phase until its deadline)."""
        if not self.drawn:
            return Phase.DRAWING if now < self.draw_deadline else Phase.OVER
        for phase, deadline in (
            (Phase.COMMIT, self.commit_deadline),
            (Phase.REVEAL, self.reveal_deadline),
            (Phase.APPEAL, self.appeal_deadline),
        ):
            if now < deadline:
                return phase
        return Phase.OVER

    def ends_at(self, phase: Phase) -> int:
        """When `phase` of this round ends (0 for OVER)."""
        return {
            Phase.DRAWING: self.draw_deadline,
            Phase.COMMIT: self.commit_deadline,
            Phase.REVEAL: self.reveal_deadline,
            Phase.APPEAL: self.appeal_deadline,
            Phase.OVER: 0,
        }[phase]


def current_phase(dispute: Dispute, current: Round, now: int) -> Phase:
    """The phase of `dispute`'s current round `current` at chain time `now`; the last round has no appeal
    phase."""
    phase = current.phase(now)
    return Phase.OVER if phase == Phase.APPEAL and dispute.round == LAST_ROUND else phase


@dataclass(frozen=True)
class Juror:
    """A juror's place in one round: its seats (votes), its sealed vote and, once revealed, the vote."""

    seats: int
    vote: Vote
    commitment: bytes


@dataclass(frozen=True)
class Resolution:
    """What a resolved dispute moved (its DisputeResolved event): `slashed` from the miners held to account,
    `juror_rewards` paid to coherent seats and `penalties` taken from incoherent and silent ones (token base
    units); `block` is the block it was resolved in."""

    outcome: DisputeStatus
    slashed: int
    juror_rewards: int
    penalties: int
    block: int


@dataclass(frozen=True)
class Verifier:
    """A staked verifier; all zero if never registered. `locked`: stake held by the jury seats it sits on and
    the audits it opened that are not settled yet. It can be drawn while active (not exiting); its stake can
    be withdrawn from `release_at` (seconds), once no seat holds it."""

    stake: int
    locked: int
    registered_at_block: int
    exit_at_block: int
    release_at: int

    @property
    def registered(self) -> bool:
        return self.stake > 0

    @property
    def active(self) -> bool:
        """Registered, with stake, and not exiting: what `isVerifier` answers."""
        return self.stake > 0 and self.exit_at_block == 0


@dataclass(frozen=True)
class Audit:
    """A task's random audit: seeded by block `seed_block`'s random value (0: never drawn; `forced`: a seed of
    it expired unproven, so it is selected whatever the seed says); once `sealed` it is final; if `selected`,
    line `request_index` is the one a verifier may audit, and `dispute_id` is the audit's dispute (0: none),
    opened by `opener`, who locked `deposit` of its verifier stake until the audit is `settled`."""

    seed_block: int
    forced: bool
    sealed: bool
    selected: bool
    settled: bool
    request_index: int
    seed: bytes
    dispute_id: int
    opener: str
    deposit: int


class ChallengeStatus(IntEnum):
    """A line challenge: never made, waiting for an answer, answered, or settled unanswered (refunded)."""

    NONE = 0
    OPEN = 1
    ANSWERED = 2
    UNANSWERED = 3


@dataclass(frozen=True)
class Challenge:
    """The owner's challenge of one position of its task's results tree: open from `opened_at`, to be answered
    by `answer_by` (chain time)."""

    status: ChallengeStatus
    opened_at: int
    answer_by: int
