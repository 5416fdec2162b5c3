"""The on-chain task as every party reads it: its status, its record, its prices and the terms it was created
under, mirroring ITaskRegistry's structs (decoded from the tuples web3 returns)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum


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


@dataclass(frozen=True)
class TaskPrices:
    """Mirrors ITaskRegistry.TaskPrices: what a task's owner pays per million input and per million output
    tokens (token base units)."""

    input_per_million: int
    output_per_million: int

    def price(self, input_tokens: int, output_tokens: int) -> int:
        """What this usage costs at these prices, rounded down, before any cap."""
        return (input_tokens * self.input_per_million + output_tokens * self.output_per_million) // 10**6

    def cost(self, input_tokens: int, output_tokens: int, max_price: int) -> int:
        """What TaskRegistry.priceOf charges for this usage: rounded down, at most `max_price`."""
        return min(self.price(input_tokens, output_tokens), max_price)


@dataclass(frozen=True)
class TaskTerms:
    """Mirrors ITaskRegistry.TaskTerms: the registry's parameters in force when a task was created, which
    apply to it for its whole life."""

    created_at: int
    challenge_window: int
    coordinator_fee_bps: int
    fee_recipient: str
    min_stake_lock: int
    max_value_at_risk: int
