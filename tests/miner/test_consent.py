"""A miner node consents only to what its policy allows: an open task of its model, prices at or above its
price floor, a maximum price that covers the most the batch can cost, a lock its free stake covers, a deadline
not too far off, an acceptance that expires soon."""

from __future__ import annotations

from dataclasses import replace

import pytest

from client_sdk.protocol.model_identity import model_id_of
from client_sdk.protocol.task import Task, TaskPrices, TaskStatus
from miner.node.consent import DAY, ConsentPolicy, refusal, well_formed

HASH, NOW, LOCK = model_id_of("HuggingFaceTB/SmolLM2-135M-Instruct"), 1_700_000_000, 10 * 10**6
TASK = Task(
    owner="0x" + "11" * 20, deadline=NOW + DAY, status=TaskStatus.OPEN, miner_count=0, max_price=50 * 10**6,
    committed_at=0, request_count=8, model_id=HASH, input_root=bytes(32), params_hash=bytes(32),
    results_root=bytes(32), input_tokens=0, output_tokens=0, payment=0, stake_lock=0, fee=0,
)  # fmt: skip
# The batch's file: 100,000 prompt tokens and at most 1,000,000 output tokens: 32 at PRICES, under TASK's 50.
PROPOSAL = {
    "batch_id": "batch_a", "task_id": 7, "stake_lock": LOCK, "expiry": NOW + 120,
    "input_tokens": 100_000, "max_output_tokens": 1_000_000,
}  # fmt: skip
POLICY = ConsentPolicy(max_task_days=30, max_acceptance_s=3_600)
PRICES, FLOOR = TaskPrices(20 * 10**6, 30 * 10**6), 20 * 10**6  # per million tokens (in, out); the floor


def test_a_proposal_within_the_policy_is_accepted() -> None:
    assert refusal(PROPOSAL, TASK, PRICES, HASH, LOCK, FLOOR, NOW, POLICY) is None


@pytest.mark.parametrize("prices", [TaskPrices(FLOOR - 1, 30 * 10**6), TaskPrices(30 * 10**6, FLOOR - 1)])
def test_a_task_paying_under_the_price_floor_is_refused(prices: TaskPrices) -> None:
    refused = refusal(PROPOSAL, TASK, prices, HASH, LOCK, FLOOR, NOW, POLICY)
    paid = [f"{p // 10**6}.{p % 10**6:06d}" for p in (prices.input_per_million, prices.output_per_million)]
    assert refused == (
        f"task 7 pays {paid[0]} per million input tokens and {paid[1]} per million output tokens, under this "
        "miner's price floor of 20.000000"
    )


@pytest.mark.parametrize(
    ("task", "proposal", "free", "reason"),
    [
        (replace(TASK, status=TaskStatus.ASSIGNED), PROPOSAL, LOCK, "task 7 is assigned, not open"),
        (replace(TASK, model_id=bytes(32)), PROPOSAL, LOCK, "is for the model 0x0000"),
        (TASK, PROPOSAL, LOCK - 1, f"a lock of {LOCK} exceeds this miner's free stake of {LOCK - 1}"),
        (replace(TASK, deadline=NOW + 31 * DAY), PROPOSAL, LOCK, "deadline is more than 30 days away"),
        (TASK, dict(PROPOSAL, expiry=NOW + 3_601), LOCK, "not within 3600 s from now"),
        (TASK, dict(PROPOSAL, expiry=NOW), LOCK, "not within 3600 s from now"),
    ],
)
def test_a_proposal_outside_the_policy_is_refused_with_its_reason(
    task: Task, proposal: dict[str, object], free: int, reason: str
) -> None:
    refused = refusal(proposal, task, PRICES, HASH, free, FLOOR, NOW, POLICY)
    assert refused is not None and reason in refused


def test_a_task_funded_under_what_its_batch_can_cost_is_refused() -> None:
    """The payment is capped at the maximum price: serving a batch that can cost more is serving for free."""
    funded = replace(TASK, max_price=32 * 10**6)  # exactly the worst case (2 + 30): accepted
    assert refusal(PROPOSAL, funded, PRICES, HASH, LOCK, FLOOR, NOW, POLICY) is None
    short = replace(TASK, max_price=32 * 10**6 - 1)
    assert refusal(PROPOSAL, short, PRICES, HASH, LOCK, FLOOR, NOW, POLICY) == (
        "task 7's batch can cost 32.000000 at its prices (100000 input tokens and at most 1000000 output "
        "tokens), over its maximum price of 31.999999: this node would serve work nobody pays for"
    )


@pytest.mark.parametrize(
    "counts",
    [{}, {"input_tokens": None, "max_output_tokens": 5}, {"input_tokens": 5, "max_output_tokens": -1},
     {"input_tokens": "5", "max_output_tokens": 5}, {"input_tokens": True, "max_output_tokens": 5},
     {"input_tokens": 5, "max_output_tokens": 2**64}],
)  # fmt: skip
def test_a_proposal_that_does_not_say_what_its_batch_can_cost_is_refused(counts: dict[str, object]) -> None:
    proposal = {k: v for k, v in PROPOSAL.items() if k not in ("input_tokens", "max_output_tokens")} | counts
    assert refusal(proposal, TASK, PRICES, HASH, LOCK, FLOOR, NOW, POLICY) == (
        "the proposal of task 7 does not say how many tokens its batch can take"
    )


def test_counts_no_file_of_the_task_can_have_are_refused() -> None:
    """Every line's max_tokens is at least one: fewer output tokens than the task's lines is a false count."""
    lying = PROPOSAL | {"input_tokens": 0, "max_output_tokens": TASK.request_count - 1}
    assert refusal(lying, replace(TASK, max_price=1), PRICES, HASH, LOCK, FLOOR, NOW, POLICY) == (
        "the proposal of task 7 counts at most 7 output tokens for 8 lines: not this task's file"
    )


@pytest.mark.parametrize(
    "proposal",
    [None, [], "batch_a", PROPOSAL | {"task_id": "7"}, PROPOSAL | {"expiry": [1]}, PROPOSAL | {"batch_id": 7},
     PROPOSAL | {"batch_id": "b" * 65}, PROPOSAL | {"stake_lock": 10**80}, PROPOSAL | {"task_id": True},
     {k: v for k, v in PROPOSAL.items() if k != "expiry"}],
)  # fmt: skip
def test_a_malformed_proposal_is_told_apart_before_the_consent_reads_it(proposal: object) -> None:
    """What the coordinator's answer holds is not trusted: a proposal of the wrong shape is skipped."""
    assert well_formed(PROPOSAL)
    assert not well_formed(proposal)
