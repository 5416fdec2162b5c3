"""`make demo`: the main job, end to end, on one machine.

anvil + contracts, Redis, the coordinator (API + Celery worker) and two miners come up, each lending memory
for half of a tiny checkpoint, so that together they form one 2-stage pipeline; a user submits a batch of
chat requests with the SDK, paying the max price into escrow once; the pipeline serves it and both miners
sign; the coordinator commits the results root; the SDK checks every line against the chain; the challenge
window passes, the task is finalized, and everyone withdraws. The balance table shows where every token
went.
"""

from __future__ import annotations

import json
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from client_sdk.chain.types import TaskStatus
from client_sdk.units import format_amount
from demo.system import UNIT, LocalSystem, SystemConfig

QUESTIONS = (
    "What is the capital of France?",
    "Write a haiku about rain.",
    "How many legs does a spider have?",
    "Summarize: miners serve layers of a model as pipeline stages over slow links.",
    "Name three primary colors.",
    "What is 12 times 12?",
)


@dataclass(frozen=True)
class BalanceRow:
    party: str
    address: str
    before: int
    after: int


@dataclass(frozen=True)
class DemoReport:
    batch_id: str
    task_id: int
    requests: int
    input_tokens: int
    output_tokens: int
    max_price: int
    payment: int
    fee: int
    miner_amounts: tuple[tuple[str, int], ...]  # (miner address, amount), as committed
    samples: tuple[tuple[str, str], ...]  # (custom_id, answer) of a few lines
    rows: tuple[BalanceRow, ...]


def batch_lines(count: int, model: str) -> list[dict[str, object]]:
    return [
        {
            "custom_id": f"question-{i}",
            "method": "POST",
            "url": "/v1/chat/completions",
            "body": {
                "model": model,
                "messages": [{"role": "user", "content": QUESTIONS[i % len(QUESTIONS)]}],
                "max_tokens": 16,
            },
        }
        for i in range(count)
    ]


def run_demo(
    workdir: Path, requests: int = 24, max_price: int = 1 * UNIT, log: Console | None = None
) -> DemoReport:
    say = (log or Console(quiet=True)).print
    say("starting anvil, the contracts, Redis, the coordinator API and worker, and two miners ...")
    with LocalSystem(workdir, SystemConfig(miners=2, stages=2)) as system:
        market = system.market
        parties = [("user", system.user.address), ("coordinator", system.coordinator.address)]
        parties += [(f"miner {chr(65 + i)}", m.address) for i, m in enumerate(system.miner_accounts)]
        before = {address: market.token.balance_of(address) for _, address in parties}
        client = system.client()
        data = "".join(
            json.dumps(line) + "\n" for line in batch_lines(requests, system.config.model)
        ).encode()
        file = client.files.create(file=data, purpose="batch")
        batch = client.batches.create(
            input_file_id=file.id, endpoint="/v1/chat/completions", max_price=max_price
        )
        say(
            f"user submitted batch {batch.id} ({requests} requests) and escrowed "
            f"{format_amount(max_price)} in task {batch.task_id}"
        )
        batch = client.batches.wait(batch.id, poll_s=0.5, timeout_s=600)
        if batch.status != "completed":
            raise RuntimeError(f"the batch ended {batch.status}; logs are in {workdir}")
        verified = client.batches.results(batch.id)
        say(f"batch completed; all {len(verified.output)} result lines verified against the on-chain root")
        system.advance_chain_time(system.config.challenge_window + 1)
        deadline = time.monotonic() + 120
        while market.tasks.get_task(batch.task_id).status != TaskStatus.FINALIZED:
            if time.monotonic() > deadline:
                raise RuntimeError("the worker did not finalize the task")
            time.sleep(0.5)
        say("challenge window over: task finalized; everyone withdraws")
        for account in (system.user, system.coordinator, *system.miner_accounts):
            party = market.as_account(account)
            if party.escrow.balance_of(account.address):
                party.escrow.withdraw()
        task = market.tasks.get_task(batch.task_id)
        samples = tuple(
            (v.line["custom_id"], v.line["response"]["body"]["choices"][0]["message"]["content"])
            for v in verified.output[:3]
        )
        return DemoReport(
            batch_id=batch.id,
            task_id=batch.task_id,
            requests=requests,
            input_tokens=task.input_tokens,
            output_tokens=task.output_tokens,
            max_price=max_price,
            payment=task.payment,
            fee=task.fee,
            miner_amounts=tuple(
                zip(
                    market.tasks.miners_of(batch.task_id),
                    market.tasks.miner_amounts_of(batch.task_id),
                    strict=True,
                )
            ),
            samples=samples,
            rows=tuple(
                BalanceRow(name, address, before[address], market.token.balance_of(address))
                for name, address in parties
            ),
        )


def balance_table(report: DemoReport) -> Table:
    table = Table(title=f"Wallets around task {report.task_id} (mUSD)")
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


def main() -> None:
    console = Console(width=max(Console().width, 110))  # the table needs ~100 columns even when piped
    with tempfile.TemporaryDirectory(prefix="batchmarket-demo-") as scratch:
        report = run_demo(Path(scratch), log=console)
    for custom_id, answer in report.samples:
        console.print(f"  {custom_id}: {answer!r}", markup=False)
    console.print(balance_table(report))
    miners = " + ".join(format_amount(amount) for _, amount in report.miner_amounts)
    console.print(
        f"{report.input_tokens} prompt + {report.output_tokens} completion tokens: payment "
        f"{format_amount(report.payment)} = miners {miners} "
        f"+ coordinator fee {format_amount(report.fee)}; refund to the user "
        f"{format_amount(report.max_price - report.payment)}"
    )
