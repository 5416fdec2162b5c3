"""Ingest: a 50,000-line batch file uploaded, validated and committed (target: under 10 s on 2 cores).

Runs on `LocalSystem` (anvil with the contracts, Redis, SQLite, `coordinator serve`) with no miners and the
worker stopped, so the two cores serve only the path measured: the SDK's `files.create` (sign, upload; the
server parses and validates every line, tokenizes every prompt, hashes the input Merkle root and stores the
file with its 50,000 request rows) and `batches.create` (approve the escrow and create the on-chain task for
that root, then register the batch). Each SDK call is timed by its HTTP requests (httpx event hooks), so
batches.create splits into task creation (everything but its POST /v1/batches) and batch registration.

A second table times the server's ingest steps one by one in this process on the same file (wall and CPU
seconds; CPU time is what a quiet machine would need, the wall time what this shared one took), then the whole
`ingest_batch_file`, where tokenizing runs beside hashing, against tokenizing alone (target: at most 1.5x).
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import httpx
from rich.table import Table

from bench._report import figure, publish
from client_sdk import openai_batch
from client_sdk.client import Client
from client_sdk.inputs import input_tree
from client_sdk.protocol.constants import MAX_BATCH_LINES
from coordinator.config import ServedModel, Settings
from coordinator.db.migrate import upgrade
from coordinator.db.session import Database
from coordinator.services.files import count_prompt_tokens, ingest_batch_file
from demo.system import UNIT, LocalSystem, SystemConfig
from miner.pipeline.batch import load_tokenizer
from tests.coordinator.helpers import chat_line, jsonl

LINES = MAX_BATCH_LINES
ROUNDS = 3
TARGET_S = 10.0
PHASES = ("upload + validate + store", "task creation (on-chain)", "batch registration")
TARGET_OVER_TOKENIZING = 1.5  # the whole server-side ingest against tokenizing the file alone
STEPS = (
    "parse + validate lines",
    "chat template + tokenize",
    "hash lines into the input Merkle tree",
    "ingest_batch_file, all of it (+ SQLite inserts)",
)
Steps = dict[str, tuple[float, float]]  # step: (wall s, CPU s)


def batch_file(lines: int) -> bytes:
    """Chat requests of varied length, like a real batch, for the tiny model LocalSystem serves."""
    return jsonl(
        [
            chat_line(
                f"req-{i}", f"question {i}: what is {i} plus {i * 7 % 1000}? " * (1 + i % 4), max_tokens=16
            )
            for i in range(lines)
        ]
    )


class RequestClock:
    """Wall time of each HTTP request a client sends, from httpx's request and response hooks."""

    def __init__(self, client: Client) -> None:
        self.spans: list[tuple[str, float]] = []
        self._started: dict[int, float] = {}
        client.http.event_hooks = {"request": [self._request], "response": [self._response]}

    def _request(self, request: httpx.Request) -> None:
        self._started[id(request)] = time.perf_counter()

    def _response(self, response: httpx.Response) -> None:
        request = response.request
        elapsed = time.perf_counter() - self._started.pop(id(request))
        self.spans.append((f"{request.method} {request.url.path}", elapsed))

    def total(self, name: str) -> float:
        return sum(elapsed for span, elapsed in self.spans if span == name)


def timed(run: Callable[[], Any]) -> tuple[Any, float]:
    started = time.perf_counter()
    value = run()
    return value, time.perf_counter() - started


def measure_round(system: LocalSystem, data: bytes) -> dict[str, float]:
    """One upload + task + batch through the SDK, as a user runs it; seconds per phase."""
    with system.client() as client:
        clock = RequestClock(client)
        file, upload_s = timed(lambda: client.files.create(file=data, purpose="batch"))
        assert file.request_count == LINES, file
        batch, create_s = timed(
            lambda: client.batches.create(
                input_file_id=file.id, endpoint="/v1/chat/completions", max_price=10 * UNIT
            )
        )
        assert batch.status == "validating", batch
    register_s = clock.total("POST /v1/batches")
    return dict(zip(PHASES, (upload_s, create_s - register_s, register_s), strict=True))


def time_steps(model_dir: Path, data: bytes, scratch: Path) -> Steps:
    """Each ingest step alone, then the whole ingest into a fresh SQLite database."""
    tokenizer = load_tokenizer(model_dir)
    steps: Steps = {}

    def step(name: str, run: Callable[[], Any]) -> Any:
        wall, cpu = time.perf_counter(), time.process_time()
        value = run()
        steps[name] = (time.perf_counter() - wall, time.process_time() - cpu)
        return value

    lines = step(STEPS[0], lambda: openai_batch.parse_batch(data, max_lines=LINES))
    step(STEPS[1], lambda: count_prompt_tokens(tokenizer, lines))
    step(STEPS[2], lambda: input_tree([line.raw for line in lines]))
    url = f"sqlite:///{scratch / 'steps.db'}"
    upgrade(url)
    settings = Settings(database_url=url, models=(ServedModel(SystemConfig().model, model_dir),))
    database = Database(url)
    with database.session() as session:
        step(STEPS[3], lambda: ingest_batch_file(session, settings, "0x" + "11" * 20, "b.jsonl", data, 0))
    database.dispose()
    return steps


def run(scratch: Path) -> tuple[list[dict[str, float]], Steps]:
    data = batch_file(LINES)
    config = SystemConfig(miners=0, user_funds=ROUNDS * 10 * UNIT)
    with LocalSystem(scratch, config) as system:
        system.stop("worker")  # not on the ingest path; its sweeps would only take CPU from the API
        system.client().files.create(file=batch_file(10), purpose="batch")  # loads the tokenizer once
        rounds = [measure_round(system, data) for _ in range(ROUNDS)]
        steps = time_steps(system.model_dir, data, scratch)
    return rounds, steps


def report(rounds: list[dict[str, float]], steps: Steps, size: int) -> list[Table]:
    load = os.getloadavg()[0]
    timing = Table(
        title=f"Ingest of a {LINES:,}-line batch file ({size / 1e6:.1f} MB) through the HTTP API and the "
        f"chain, {ROUNDS} rounds (target: total under {TARGET_S:.0f} s)",
        caption=f"{os.cpu_count()} CPU cores, shared: load average {load:.1f} at the end of the run",
    )
    timing.add_column("phase")
    for i in range(ROUNDS):
        timing.add_column(f"round {i + 1} (s)", justify="right")
    timing.add_column("median (s)", justify="right")
    totals = [sum(r.values()) for r in rounds]
    for phase in PHASES:
        values = [r[phase] for r in rounds]
        timing.add_row(phase, *(f"{v:.2f}" for v in values), f"{statistics.median(values):.2f}")
    median_total = statistics.median(totals)
    verdict = "meets" if median_total < TARGET_S else "misses"
    timing.add_row(
        f"total ({verdict} the {TARGET_S:.0f} s target)",
        *(f"{t:.2f}" for t in totals),
        f"{median_total:.2f}",
        style="bold",
    )
    ratio = steps[STEPS[3]][0] / steps[STEPS[1]][0]
    breakdown = Table(
        title="The server's ingest steps, each alone in this process on the same file",
        caption=f"The whole ingest took {ratio:.2f}x the time of tokenizing the file alone (wall; target: at "
        f"most {TARGET_OVER_TOKENIZING}x: {'met' if ratio <= TARGET_OVER_TOKENIZING else 'missed'})",
    )
    breakdown.add_column("step")
    breakdown.add_column("wall (s)", justify="right")
    breakdown.add_column("CPU (s, all threads)", justify="right")
    for name in STEPS:
        wall, cpu = steps[name]
        breakdown.add_row(name, f"{wall:.2f}", f"{cpu:.2f}")
    return [timing, breakdown]


def plot(rounds: list[dict[str, float]], path: Path) -> None:
    with figure(path, figsize=(7, 3.5)) as ax:
        labels = [f"round {i + 1}" for i in range(len(rounds))]
        left = [0.0] * len(rounds)
        for phase in PHASES:
            values = [r[phase] for r in rounds]
            ax.barh(labels, values, left=left, label=phase)
            left = [a + b for a, b in zip(left, values, strict=True)]
        ax.axvline(TARGET_S, color="red", linestyle="--", label=f"target ({TARGET_S:.0f} s)")
        ax.set_xlabel("seconds")
        ax.set_title(f"Ingest of a {LINES:,}-line batch file, per phase")
        ax.invert_yaxis()
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2, fontsize="small")


def main() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        rounds, steps = run(Path(scratch))
    tables = report(rounds, steps, len(batch_file(LINES)))
    publish("ingest", tables, width=120, plot=partial(plot, rounds))


if __name__ == "__main__":
    main()
