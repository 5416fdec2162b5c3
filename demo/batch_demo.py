"""`make demo`: the main job, end to end, on one machine, serving a real model.

anvil + contracts, Redis, the coordinator (API + Celery worker) and two miners come up, each lending memory
for half of SmolLM2-135M-Instruct (made from its package on the registry by `make model`), so that together
they form one 2-stage pipeline; a user submits two batches with the SDK, one of chat requests and one of text
completions, greedy and sampled, paying each task's max price into escrow once; the pipeline serves them and
both miners sign; the coordinator commits each results root; the SDK checks every line against the chain; the
challenge window passes, the tasks are finalized, and everyone withdraws. The demo prints the questions with
the answers that came back, and a balance table showing where every token went.
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from client_sdk import openai_batch
from client_sdk.client import Batch, Client
from client_sdk.protocol.task import TaskStatus
from client_sdk.units import format_amount
from demo.system import UNIT, LocalSystem, SystemConfig
from miner.model.packaged import SMOLLM2, ensure


@dataclass(frozen=True)
class Ask:
    """One demo request: a chat question or a text to complete, answered greedily or sampled."""

    text: str
    temperature: float = 0.0  # 0: greedy

    @property
    def decoding(self) -> str:
        return "greedy" if self.temperature == 0 else f"sampled, T = {self.temperature:g}"


QUESTIONS = (
    Ask("What is the capital of France?"),
    Ask("How many legs does a spider have?"),
    Ask("Name three primary colors."),
    Ask("What is 12 times 12?"),
    Ask("Write a haiku about rain.", temperature=0.8),
    Ask("Suggest a name for a friendly robot.", temperature=1.0),
)
COMPLETIONS = (
    Ask("The capital of Japan is"),
    Ask("Once upon a time, in a small village by the sea,", temperature=0.8),
)
MAX_TOKENS = 48


def real_model_config(miners: int = 2, stages: int = 2, relayed_miners: tuple[int, ...] = ()) -> SystemConfig:
    """`miners` miners serving SmolLM2-135M-Instruct (its checkpoint made if missing), each lending memory
    for 1/`stages` of it: pipelines of `stages` miners; those in `relayed_miners` behind NAT, reached
    through the coordinator's relay."""
    return SystemConfig(
        miners=miners, stages=stages, model=SMOLLM2.name, model_dir=ensure(), relayed_miners=relayed_miners
    )


def batch_lines(count: int, model: str) -> list[dict[str, object]]:
    """`count` chat lines cycling through QUESTIONS."""
    return [
        _line(f"question-{i}", openai_batch.CHAT, model, QUESTIONS[i % len(QUESTIONS)], i)
        for i in range(count)
    ]


def completion_lines(model: str) -> list[dict[str, object]]:
    return [
        _line(f"completion-{i}", openai_batch.COMPLETIONS, model, ask, i) for i, ask in enumerate(COMPLETIONS)
    ]


def _line(custom_id: str, url: str, model: str, ask: Ask, seed: int) -> dict[str, object]:
    body: dict[str, object] = {"model": model, "max_tokens": MAX_TOKENS, "temperature": ask.temperature}
    if ask.temperature:
        body["seed"] = seed
    if url == openai_batch.CHAT:
        body["messages"] = [{"role": "user", "content": ask.text}]
    else:
        body["prompt"] = ask.text
    return {"custom_id": custom_id, "method": "POST", "url": url, "body": body}


@dataclass(frozen=True)
class BalanceRow:
    party: str
    address: str
    before: int
    after: int


@dataclass(frozen=True)
class Settlement:
    """One task as settled on-chain."""

    task_id: int
    max_price: int
    input_tokens: int
    output_tokens: int
    payment: int
    fee: int
    miner_amounts: tuple[tuple[str, int], ...]  # (miner address, amount), as committed


@dataclass(frozen=True)
class Answer:
    endpoint: str  # chat or completion
    decoding: str
    asked: str  # the question, or the text to complete
    answer: str


@dataclass(frozen=True)
class DemoReport:
    tasks: tuple[Settlement, ...]
    answers: tuple[Answer, ...]
    rows: tuple[BalanceRow, ...]

    @property
    def payment(self) -> int:
        return sum(t.payment for t in self.tasks)

    @property
    def fee(self) -> int:
        return sum(t.fee for t in self.tasks)


def run_demo(
    workdir: Path,
    requests: int = 24,
    max_price: int = 1 * UNIT,
    log: Console | None = None,
    behind_relay: bool = False,
) -> DemoReport:
    """Runs the demo in `workdir`: `requests` chat lines in one batch and the completions in another. With
    `behind_relay`, the second miner is behind NAT: nothing can dial it, and its peer reaches it through
    the coordinator's relay."""
    say = (log or Console(quiet=True)).print
    say("starting anvil, the contracts, Redis, the coordinator API and worker, and two miners ...")
    if behind_relay:
        say("miner B is behind NAT: its peer sends to it through the coordinator's relay")
    config = real_model_config(relayed_miners=(1,) if behind_relay else ())
    with LocalSystem(workdir, config) as system:
        say(f"market explorer (while the demo runs): {system.api_url}/explorer")
        market = system.market
        parties = [("user", system.user.address), ("coordinator", system.coordinator.address)]
        parties += [(f"miner {chr(65 + i)}", m.address) for i, m in enumerate(system.miner_accounts)]
        before = {address: market.token.balance_of(address) for _, address in parties}
        client = system.client()
        model = system.config.model
        batches = [
            _submit(client, batch_lines(requests, model), openai_batch.CHAT, max_price),
            _submit(client, completion_lines(model), openai_batch.COMPLETIONS, max_price),
        ]
        for batch in batches:
            say(
                f"user submitted batch {batch.id} ({batch.request_counts.total} requests to "
                f"{batch.endpoint}) and escrowed {format_amount(max_price)} in task {batch.task_id}; "
                f"its progress: {system.api_url}/explorer/batches/{batch.id}"
            )
        answers = []
        for batch in batches:
            done = client.batches.wait(batch.id, poll_s=0.5, timeout_s=600)
            if done.status != "completed":
                raise RuntimeError(f"batch {batch.id} ended {done.status}; logs are in {workdir}")
            verified = client.batches.results(batch.id)
            say(
                f"batch {batch.id} completed; its {len(verified.output)} result lines verified against "
                "the on-chain root"
            )
            answers += _answers([v.line for v in verified.output], batch.endpoint)
        system.advance_chain_time(system.config.challenge_window + 1)
        deadline = time.monotonic() + 120
        while any(market.tasks.get_task(b.task_id).status != TaskStatus.FINALIZED for b in batches):
            if time.monotonic() > deadline:
                raise RuntimeError("the worker did not finalize the tasks")
            time.sleep(0.5)
        say("challenge window over: tasks finalized; everyone withdraws")
        for account in (system.user, system.coordinator, *system.miner_accounts):
            party = market.as_account(account)
            if party.escrow.balance_of(account.address):
                party.escrow.withdraw()
        return DemoReport(
            tasks=tuple(_settlement(system, b.task_id, max_price) for b in batches),
            answers=tuple(answers),
            rows=tuple(
                BalanceRow(name, address, before[address], market.token.balance_of(address))
                for name, address in parties
            ),
        )


def _submit(client: Client, lines: list[dict[str, object]], endpoint: str, max_price: int) -> Batch:
    data = "".join(json.dumps(line) + "\n" for line in lines).encode()
    file = client.files.create(file=data, purpose="batch")
    return client.batches.create(input_file_id=file.id, endpoint=endpoint, max_price=max_price)


def _answers(lines: list[dict[str, Any]], endpoint: str) -> list[Answer]:
    """One answer per distinct request, in the order asked."""
    chat = endpoint == openai_batch.CHAT
    asks, prefix = (QUESTIONS, "question") if chat else (COMPLETIONS, "completion")
    by_id = {line["custom_id"]: line["response"]["body"]["choices"][0] for line in lines}
    answers = []
    for index, ask in enumerate(asks):
        choice = by_id.get(f"{prefix}-{index}")
        if choice is None:
            continue  # fewer requests than questions
        text = choice["message"]["content"] if chat else ask.text + choice["text"]
        answers.append(Answer("chat" if chat else "completion", ask.decoding, ask.text, text))
    return answers


def _settlement(system: LocalSystem, task_id: int, max_price: int) -> Settlement:
    tasks = system.market.tasks
    task = tasks.get_task(task_id)
    return Settlement(
        task_id=task_id,
        max_price=max_price,
        input_tokens=task.input_tokens,
        output_tokens=task.output_tokens,
        payment=task.payment,
        fee=task.fee,
        miner_amounts=tuple(zip(tasks.miners_of(task_id), tasks.miner_amounts_of(task_id), strict=True)),
    )


def answers_table(report: DemoReport) -> Table:
    table = Table(title=f"{SMOLLM2.name} over a 2-stage pipeline of two miners", show_lines=True)
    for column in ("request", "asked", "answer"):
        table.add_column(column, overflow="fold")
    for answer in report.answers:
        table.add_row(f"{answer.endpoint}\n{answer.decoding}", answer.asked, answer.answer.strip())
    return table


def balance_table(report: DemoReport) -> Table:
    tasks = " and ".join(str(t.task_id) for t in report.tasks)
    table = Table(title=f"Wallets around tasks {tasks} (mUSD)")
    for column in ("party", "address", "before", "after", "change"):
        table.add_column(column, justify="left" if column in ("party", "address") else "right")
    for row in report.rows:
        change = row.after - row.before
        table.add_row(
            row.party,
            row.address,
            format_amount(row.before),
            format_amount(row.after),
            ("+" if change > 0 else "") + format_amount(change),
        )
    return table


def main(
    behind_relay: Annotated[
        bool,
        typer.Option(
            help="Put the second miner behind NAT: it accepts no connection, and its peer reaches it through "
            "the coordinator's relay (`coordinator relay`)."
        ),
    ] = False,
    report_file: Annotated[
        Path | None,
        typer.Option(
            "--report",
            help="Also write what happened (each task's settlement, the answers, every balance before and "
            "after) to this file as JSON.",
        ),
    ] = None,
) -> None:
    """The main job end to end on one machine: chain, coordinator, a 2-stage pipeline of 2 miners serving
    SmolLM2; batches submitted, served, verified and paid."""
    console = Console(width=max(Console().width, 110))  # the tables need ~100 columns even when piped
    with tempfile.TemporaryDirectory(prefix="batchmarket-demo-") as scratch:
        report = run_demo(Path(scratch), log=console, behind_relay=behind_relay)
    if report_file is not None:
        report_file.write_text(json.dumps(dataclasses.asdict(report), indent=2) + "\n")
    console.print(answers_table(report))
    console.print(balance_table(report))
    for task in report.tasks:
        miners = " + ".join(format_amount(amount) for _, amount in task.miner_amounts)
        console.print(
            f"task {task.task_id}: {task.input_tokens} prompt + {task.output_tokens} completion tokens: "
            f"payment {format_amount(task.payment)} = miners {miners} + coordinator fee "
            f"{format_amount(task.fee)}; refund to the user {format_amount(task.max_price - task.payment)}"
        )
