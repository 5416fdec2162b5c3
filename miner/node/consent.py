"""A miner's consent to a task's stake lock. The coordinator proposes an assignment; the node reads the task
on-chain and accepts only what its policy allows: an open task of the model it serves, paying at least the
miner's registered price floor per million tokens, funded for the most its batch can cost (the proposal's
token counts of the file at the task's prices: a smaller maximum price caps what the miners are paid), a lock
its free stake covers, a deadline not too far off (the lock lasts until the task settles, and at most until
its deadline plus the dispute period), an acceptance that expires soon. Then it signs `AcceptTask`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeGuard

from eth_account.signers.local import LocalAccount

from client_sdk.chain.contracts import Market
from client_sdk.eip712 import Acceptance, sign_acceptance
from client_sdk.protocol.model_identity import describe
from client_sdk.protocol.task import Task, TaskPrices, TaskStatus
from client_sdk.units import format_amount

DAY = 86_400


@dataclass(frozen=True)
class ConsentPolicy:
    """What a node accepts: tasks whose deadline is at most `max_task_days` away, acceptances usable for at
    most `max_acceptance_s`."""

    max_task_days: float = 30.0
    max_acceptance_s: int = 3_600


def refusal(
    proposal: dict[str, Any],
    task: Task,
    prices: TaskPrices,
    model_hash: bytes,
    free_stake: int,
    price_floor: int,
    chain_now: int,
    policy: ConsentPolicy,
) -> str | None:
    """Why the node must not accept `proposal` (None: it may); `prices` are the task's, `model_hash` is the
    identity of the checkpoint this node serves and `price_floor` the least it takes per million tokens (its
    registered profile's)."""
    task_id, lock, expiry = int(proposal["task_id"]), int(proposal["stake_lock"]), int(proposal["expiry"])
    if task.status != TaskStatus.OPEN:
        return f"task {task_id} is {task.status.name.lower()}, not open"
    if bytes(task.model_id) != model_hash:
        return (
            f"task {task_id} is for the model {describe(task.model_id)}, not the checkpoint this node serves "
            f"({describe(model_hash)})"
        )
    cheapest = min(prices.input_per_million, prices.output_per_million)
    if cheapest < price_floor:
        return (
            f"task {task_id} pays {format_amount(prices.input_per_million)} per million input tokens and "
            f"{format_amount(prices.output_per_million)} per million output tokens, under this miner's price "
            f"floor of {format_amount(price_floor)}"
        )
    worst = _worst_case_cost(proposal, prices)
    if worst is None:
        return f"the proposal of task {task_id} does not say how many tokens its batch can take"
    most = proposal["max_output_tokens"]
    if most < task.request_count:  # every line's max_tokens is at least one
        return (
            f"the proposal of task {task_id} counts at most {most} output tokens for {task.request_count} "
            "lines: not this task's file"
        )
    if worst > task.max_price:
        tokens = proposal["input_tokens"]
        return (
            f"task {task_id}'s batch can cost {format_amount(worst)} at its prices ({tokens} input tokens "
            f"and at most {most} output tokens), over its maximum price of {format_amount(task.max_price)}: "
            "this node would serve work nobody pays for"
        )
    if lock > free_stake:
        return f"a lock of {lock} exceeds this miner's free stake of {free_stake}"
    if task.deadline - chain_now > policy.max_task_days * DAY:
        return f"task {task_id}'s deadline is more than {policy.max_task_days:g} days away"
    if not chain_now < expiry <= chain_now + policy.max_acceptance_s:
        return f"the acceptance would expire at {expiry}, not within {policy.max_acceptance_s} s from now"
    return None


def well_formed(proposal: object) -> bool:
    """Whether a proposal from the coordinator has the fields the consent reads, of their types (a node takes
    nothing else: a malformed answer is a fault of the coordinator's, skipped, never a crash)."""
    if not isinstance(proposal, dict):
        return False
    batch_id = proposal.get("batch_id")
    numbers = (proposal.get(name) for name in ("task_id", "stake_lock", "expiry"))
    return isinstance(batch_id, str) and 0 < len(batch_id) <= 64 and all(map(_is_count, numbers))


def _worst_case_cost(proposal: dict[str, Any], prices: TaskPrices) -> int | None:
    """What the proposal's batch costs at most at the task's prices: its prompt tokens and every line's
    max_tokens, as the coordinator counted them from the file (None: the proposal does not say)."""
    tokens, most = proposal.get("input_tokens"), proposal.get("max_output_tokens")
    if not (_is_count(tokens) and _is_count(most)):
        return None
    return prices.price(tokens, most)


def _is_count(value: object) -> TypeGuard[int]:
    return type(value) is int and 0 <= value < 2**64  # not a bool, a float or a string of digits


class Consenter:
    """Signs this miner's acceptances of the tasks its policy allows."""

    def __init__(
        self,
        signer: LocalAccount,
        miner: str,
        market: Market,
        model_hash: bytes,
        policy: ConsentPolicy = ConsentPolicy(),
    ) -> None:
        self.signer = signer  # the miner's registered signer (its own account, or a key of its own)
        self.miner = miner  # the miner's account address, which the acceptance names
        self.market = market
        self.model_hash = model_hash
        self.policy = policy

    def refusal(self, proposal: dict[str, Any]) -> str | None:
        task_id = int(proposal["task_id"])
        task, prices = self.market.tasks.get_task(task_id), self.market.tasks.prices_of(task_id)
        free = self.market.registry.stake_of(self.miner).free
        registered = self.market.registry.profile_of(self.miner)
        if registered.signer.lower() != self.signer.address.lower():
            return (
                f"the registered signer is now {registered.signer}, but this node signs with "
                f"{self.signer.address}: restart it with that signer's key (--signer-keystore)"
            )
        floor = registered.price_floor
        chain_now = self.market.chain_time()
        return refusal(proposal, task, prices, self.model_hash, free, floor, chain_now, self.policy)

    def lines(self, proposal: dict[str, Any]) -> int:
        """How many lines the proposal's task has (on-chain): the lines this node may journal for it."""
        return self.market.tasks.get_task(int(proposal["task_id"])).request_count

    def sign(self, proposal: dict[str, Any]) -> Acceptance:
        market = self.market
        return sign_acceptance(
            self.signer,
            int(proposal["task_id"]),
            self.miner,
            int(proposal["stake_lock"]),
            int(proposal["expiry"]),
            market.w3.eth.chain_id,
            market.deployment.task_registry,
        )
