"""Typed views of on-chain records, decoded from the tuples web3 returns."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Any


class TaskStatus(IntEnum):
    """Mirrors ITaskRegistry.TaskStatus; every allowed transition increases the value."""

    NONE = 0
    OPEN = 1
    ASSIGNED = 2
    RESULTS_COMMITTED = 3
    DISPUTED = 4
    FINALIZED = 5
    EXPIRED = 6
    CANCELLED = 7


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

    def as_tuple(self) -> tuple[Any, ...]:
        return (
            self.signer,
            self.gpu_class,
            self.vram_gb,
            self.gpu_count,
            self.region,
            self.price_floor,
            self.endpoint,
            list(self.model_ids),
        )

    @classmethod
    def from_tuple(cls, raw: Any) -> MinerProfile:
        signer, gpu_class, vram_gb, gpu_count, region, price_floor, endpoint, model_ids = raw
        return cls(
            signer,
            bytes(gpu_class),
            vram_gb,
            gpu_count,
            bytes(region),
            price_floor,
            endpoint,
            tuple(bytes(m) for m in model_ids),
        )


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
class Task:
    owner: str
    deadline: int
    status: TaskStatus
    miner_count: int
    max_price: int
    committed_at: int
    request_count: int
    model_id: bytes
    input_root: bytes
    params_hash: bytes
    results_root: bytes
    input_tokens: int
    output_tokens: int
    payment: int
    stake_lock: int
    fee: int

    @classmethod
    def from_tuple(cls, raw: Any) -> Task:
        values = list(raw)
        values[2] = TaskStatus(values[2])
        for i in (7, 8, 9, 10):
            values[i] = bytes(values[i])
        return cls(*values)


@dataclass(frozen=True)
class Dispute:
    """`challenger` is the task owner (for an audit too, which it did not pay for); `audit`: opened by a
    verifier on a randomly selected line, with the bond from the audit pool. Verifiers registered before
    `opened_at_block` vote."""

    task_id: int
    challenger: str
    voting_deadline: int
    status: DisputeStatus
    votes_correct: int
    votes_at_fault: int
    bond: int
    request_index: int
    opened_at_block: int
    audit: bool
    leaf_hash: bytes

    @classmethod
    def from_tuple(cls, raw: Any) -> Dispute:
        values = list(raw)
        values[3] = DisputeStatus(values[3])
        values[9] = bool(values[9])
        values[10] = bytes(values[10])
        return cls(*values)


@dataclass(frozen=True)
class Verifier:
    """A staked verifier; all zero if not registered. It votes on disputes opened after `registered_at_block`
    and (once exiting) before `exit_at_block`; its stake can be withdrawn from `release_at` (seconds)."""

    stake: int
    registered_at_block: int
    exit_at_block: int
    release_at: int

    @property
    def registered(self) -> bool:
        return self.stake > 0

    @property
    def active(self) -> bool:
        """Registered and not exiting: what `isVerifier` answers."""
        return self.stake > 0 and self.exit_at_block == 0


@dataclass(frozen=True)
class Audit:
    """A task's random audit draw: drawn at `draw_block` (0: never), `seed` sealed (empty: not yet), and if
    `selected`, line `request_index` is the one a verifier may audit."""

    draw_block: int
    selected: bool
    request_index: int
    seed: bytes

    @property
    def sealed(self) -> bool:
        return any(self.seed)

    @classmethod
    def from_tuple(cls, raw: Any) -> Audit:
        draw_block, selected, request_index, seed = raw
        return cls(draw_block, bool(selected), request_index, bytes(seed))
