"""`arbitration line challenge | show | settle`: a task's owner names lines of its committed results that must
be shown to it (each leaf, its proofs and a signing miner that answers for it) within the answer period; a
line nobody answers refunds the whole task and slashes its signers. Honest coordinators and miners answer at
once: a challenge costs the owner only gas and holds the task's payment while it is open."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from client_sdk.chain.contracts import Market
from client_sdk.chain.types import ChallengeStatus
from client_sdk.cli.support import JsonOption, command_group, console, on_chain
from client_sdk.errors import UserError
from client_sdk.protocol.task import TaskStatus
from client_sdk.units import format_utc

app = command_group("Challenge lines of your task's committed results: each must be answered in time.")

TaskArgument = Annotated[int, typer.Argument(min=1, help="On-chain task id.")]
LineArgument = Annotated[
    int, typer.Argument(min=0, help="Line (request index, from 0) of the task's results.")
]
STATES = {
    ChallengeStatus.OPEN: "waiting for an answer",
    ChallengeStatus.ANSWERED: "answered: the line is in the results and a signing miner answers for it",
    ChallengeStatus.UNANSWERED: "unanswered: the task was refunded and its signers slashed",
}


@app.command("challenge")
@on_chain(signing=True)
def challenge(market: Market, task_id: TaskArgument, lines: Annotated[list[int], LineArgument]) -> None:
    """Challenge LINES of your committed task (at most 16 per task, inside its challenge window): each must be
    answered by the answer period's end, or the task is refunded to you with its signers' stake locks."""
    task = market.tasks.get_task(task_id)
    if task.status == TaskStatus.NONE:
        raise UserError(f"there is no task {task_id}")
    if task.owner.lower() != market.address.lower():
        raise UserError(f"task {task_id} is {task.owner}'s: only its owner challenges its lines")
    for line in lines:
        market.challenges.challenge_line(task_id, line)
        answer_by = market.challenges.challenge_of(task_id, line).answer_by
        console.print(f"task {task_id} line {line}: challenged; to be answered by {format_utc(answer_by)}")


@app.command("show")
@on_chain(signing=False)
def show(market: Market, task_id: TaskArgument, as_json: JsonOption = False) -> None:
    """Every challenged line of a task: answered, waiting (until when), or unanswered."""
    report = []
    for line in market.challenges.challenged_lines_of(task_id):
        record = market.challenges.challenge_of(task_id, line)
        report.append({"line": line, "status": record.status.name.lower(), "answer_by": record.answer_by})
    if as_json:
        console.print_json(json.dumps(report))
        return
    if not report:
        console.print(f"task {task_id}: no line challenged")
    for item in report:
        state = STATES[ChallengeStatus[str(item["status"]).upper()]]
        until = f" until {format_utc(int(str(item['answer_by'])))}" if item["status"] == "open" else ""
        console.print(f"task {task_id} line {item['line']}: {state}{until}", soft_wrap=True)


@app.command("settle")
@on_chain(signing=True)
def settle(market: Market, task_id: TaskArgument, line: LineArgument) -> None:
    """Anyone, once a challenge's answer period is over: refunds the task to its owner in full; the stake
    locks of the miners that signed it go to the audit pool."""
    record = market.challenges.challenge_of(task_id, line)
    if record.status != ChallengeStatus.OPEN:
        state = STATES.get(record.status, "never challenged")
        raise UserError(f"task {task_id} line {line} is not waiting for an answer: {state}")
    if market.chain_time() <= record.answer_by:
        raise UserError(
            f"task {task_id} line {line} may still be answered until {format_utc(record.answer_by)}"
        )
    owner = market.tasks.get_task(task_id).owner
    before = market.escrow.balance_of(owner)
    market.challenges.settle_unanswered(task_id, line)
    gained = market.escrow.balance_of(owner) - before
    console.print(
        f"task {task_id} line {line} went unanswered: {market.amount(gained)} to its owner {owner} "
        "(`market withdraw` takes it out)",
        soft_wrap=True,
    )
