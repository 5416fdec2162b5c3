"""API: batch status polling by 200 clients while a batch runs on the same machine, wallet-signed versus on
session tokens.

The whole system runs on this machine as `make demo` runs it (anvil, Redis, `coordinator serve` with one
worker per core, the Celery worker and two miner nodes serving the tiny model, each miner on its share of the
cores and at a lower CPU priority), on PostgreSQL as a deployment would; a 30,000-line batch keeps the miners,
the worker and the database busy while 200 clients poll it (GET /v1/batches/{id}, the call the SDK's
`batches.wait` makes every 2 s), each on its own keep-alive connection. The same polls run first on an idle
system (a cancelled batch, before the long one is submitted) and then with the batch running, each way:

- signed: every poll carries a fresh wallet signature (EIP-191 recovery and a Redis nonce write on the server;
  the headers are made before the clock starts, as the client's CPU is not the server's);
- session: every poll carries the client's session token (one signature bought it; the server checks an
  HMAC).

The baseline is the signed row of the same background; the target is p99 under 200 ms with the batch running.
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import httpx
import numpy as np
from rich.table import Table

from bench._report import figure, publish, report_table
from bench.api_polling import SDK_POLL_S, load
from client_sdk.auth import sign_request
from client_sdk.protocol.task import TaskPrices
from demo.batch_demo import batch_lines
from demo.services import postgres_server
from demo.system import UNIT, LocalSystem, SystemConfig

CLIENTS = 200
POLLS_PER_CLIENT = 10  # 2,000 polls per row, 20 s at one poll per 2 s per client
POLLS = 1 + POLLS_PER_CLIENT  # and one unmeasured, to open the connection
BATCH_LINES = 30_000
TARGET_P99_MS = 200.0
SIGNATURE_LIFETIME_S = 300


@dataclass(frozen=True)
class Row:
    background: str
    auth: str
    latencies_ms: np.ndarray
    errors: int
    progress: str  # the batch's lines done during the row

    def percentile(self, q: float) -> float:
        return float(np.percentile(self.latencies_ms, q))


def signed_headers(system: LocalSystem, target: str) -> list[list[str]]:
    user = system.user
    return [
        [
            sign_request(user, "GET", target, lifetime_s=SIGNATURE_LIFETIME_S)
            for _ in range(1 + POLLS_PER_CLIENT)
        ]
        for _ in range(CLIENTS)
    ]


def session_headers(system: LocalSystem) -> list[list[str]]:
    """One session per client, each bought with its own signature."""
    headers = []
    with httpx.Client(base_url=system.api_url, timeout=60) as http:
        for _ in range(CLIENTS):
            signed = sign_request(system.user, "POST", "/v1/auth/session")
            token = http.post("/v1/auth/session", headers={"Authorization": signed}).json()["token"]
            headers.append([f"Bearer {token}"] * POLLS)
    return headers


def done(system: LocalSystem, batch_id: str) -> int:
    counts = system.client().batches.retrieve(batch_id).request_counts
    return counts.completed + counts.failed


def measure(system: LocalSystem, batch_id: str, background: str) -> list[Row]:
    target = f"/v1/batches/{batch_id}"
    rows = []
    for auth, headers in (("signed", signed_headers(system, target)), ("session", session_headers(system))):
        before = done(system, batch_id)
        targets = [target] * len(headers)
        latencies, _, errors = asyncio.run(load(system.api_url, targets, headers, SDK_POLL_S))
        progress = f"{before} -> {done(system, batch_id)}"
        rows.append(Row(background, auth, np.array(latencies) * 1000, len(errors), progress))
    return rows


def run(scratch: Path) -> list[Row]:
    with postgres_server() as database_url:
        config = SystemConfig(
            miners=2, api_workers=os.cpu_count() or 1, work_unit_size=32, database_url=database_url
        )
        return run_on(scratch, config)


def run_on(scratch: Path, config: SystemConfig) -> list[Row]:
    with LocalSystem(scratch, config) as system:
        client = system.client()
        data = "".join(json.dumps(line) + "\n" for line in batch_lines(BATCH_LINES, config.model)).encode()
        file = client.files.create(file=data, purpose="batch")
        price = TaskPrices(config.price_per_million_tokens, config.price_per_million_tokens)
        # a batch the clients poll while it waits for its turn: the idle rows' target
        idle = client.batches.create(
            input_file_id=file.id, endpoint="/v1/chat/completions", max_price=UNIT, prices=price
        )
        client.batches.cancel(idle.id)
        rows = measure(system, idle.id, "idle")
        busy = client.batches.create(
            input_file_id=file.id, endpoint="/v1/chat/completions", max_price=50 * UNIT, prices=price
        )
        deadline = time.monotonic() + 300
        while client.batches.retrieve(busy.id).status != "in_progress" or done(system, busy.id) == 0:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the batch did not start; logs are in {scratch}")
            time.sleep(1)
        rows += measure(system, busy.id, "batch running")
        after = client.batches.retrieve(busy.id)
        if after.status != "in_progress":
            raise RuntimeError(
                f"the batch was {after.status} ({after.status_detail or after.errors}) before the "
                f"measurement ended; logs are in {scratch}"
            )
    return rows


def report(rows: list[Row]) -> Table:
    table = report_table(
        title=f"GET /v1/batches/{{id}} by {CLIENTS} clients polling every {SDK_POLL_S:g} s, "
        f"{CLIENTS * POLLS_PER_CLIENT:,} polls per row "
        f"(target: p99 under {TARGET_P99_MS:.0f} ms with the batch running)",
        caption=f"the whole system and the load generator on this machine's {os.cpu_count()} cores; "
        f"coordinator serve with {os.cpu_count()} workers on PostgreSQL; baseline: the signed row of the "
        "same background",
        columns=(
            "background",
            "auth",
            "p50 ms",
            "p95 ms",
            "p99 ms",
            "max ms",
            "p99 vs signed",
            "errors",
            "lines done during the row",
        ),
        left=("background", "auth"),
    )
    for row in rows:
        baseline = next(r for r in rows if r.background == row.background and r.auth == "signed")
        verdict = ""
        if row.background == "batch running":
            verdict = " (met)" if row.percentile(99) < TARGET_P99_MS else " (missed)"
        table.add_row(
            row.background,
            row.auth,
            f"{row.percentile(50):.1f}",
            f"{row.percentile(95):.1f}",
            f"{row.percentile(99):.1f}{verdict}",
            f"{row.latencies_ms.max():.1f}",
            f"{row.percentile(99) / baseline.percentile(99):.2f}",
            str(row.errors),
            row.progress if row.background == "batch running" else "-",
        )
    return table


def plot(rows: list[Row], path: Path) -> None:
    with figure(path, figsize=(7, 4)) as ax:
        labels = [f"{r.background}\n{r.auth}" for r in rows]
        for q, marker in ((50, "o"), (95, "s"), (99, "^")):
            ax.plot(labels, [r.percentile(q) for r in rows], marker=marker, linestyle="none", label=f"p{q}")
        ax.axhline(TARGET_P99_MS, color="grey", linestyle="--", label="p99 target")
        ax.set_yscale("log")
        ax.set_ylabel("latency (ms)")
        ax.set_title(f"{CLIENTS} clients polling every {SDK_POLL_S:g} s")
        ax.legend()


def main() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        rows = run(Path(scratch))
    publish("api_polling_busy", [report(rows)], width=130, plot=partial(plot, rows))


if __name__ == "__main__":
    main()
