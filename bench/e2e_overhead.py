"""End-to-end: output tokens/s of a 256-request batch through the whole system, against the same miner work
done by `miner run-local` on the same file, both serving SmolLM2-135M-Instruct (target: the system costs at
most 15%).

The system is `LocalSystem` with one miner node: anvil with the contracts, Redis, SQLite, `coordinator serve`,
a Celery worker and one `miner serve` on the real model. Alone, the node is a one-stage pipeline (its stage
thread holds the whole model), so the fair `run-local` is one stage (`--stages 1`) with the node's settings:
the same sequences in flight (32), one microbatch, no KV offloading. Both read the same file and, greedy,
generate the same tokens (the table checks the counts). The requests are chat questions the model answers in
a few dozen tokens, at most 32 to 160.

Two placements of the work on this 2-core machine:
- the target: the miner computes on one core (torch on one thread) on both sides, and the rest of the system
  (API, worker, anvil, Redis) has the other, as in a deployment, where the coordinator and the chain run on
  other machines than the miner's GPU: the overhead is then what the system costs the miner's throughput;
- for reference, everything on both cores: the miner's torch threads then compete with the coordinator's
  processes for the same two cores, which a deployment does not do.

The system's time runs from the SDK's upload (`files.create`) through `batches.create` (task and escrow
on-chain) to the batch being `completed`: dispatched in work units, generated, collected, signed by the miner
and committed on-chain. A 4-request batch goes through first, so the miner has joined and loaded its layers,
as on a running market. `run-local`'s time is its own generation time (from its pipeline's start to its last
completion: its stage process has loaded the model by then), as the CLI reports it.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

from rich.table import Table

from bench._report import figure, publish, report_table
from client_sdk.openai_batch import CHAT
from demo.batch_demo import real_model_config
from demo.system import UNIT, LocalSystem
from miner.cli.serve import MAX_BATCH_SIZE
from miner.model.packaged import SMOLLM2
from miner.pipeline.batch import RunSettings, run_batch
from tests.coordinator.helpers import chat_line, jsonl

REQUESTS = 256
TARGET_OVERHEAD = 0.15
MINER_THREADS = 1  # the target placement: the miner on one core, the rest of the system on the other


@dataclass(frozen=True)
class Measured:
    name: str
    requests: int
    output_tokens: int
    seconds: float

    @property
    def tokens_per_s(self) -> float:
        return self.output_tokens / self.seconds


def batch_file(requests: int) -> bytes:
    """Chat questions with at most 32 to 160 output tokens (the model mostly stops on its own before)."""
    return jsonl(
        [
            chat_line(
                f"req-{i}",
                f"question {i}: what is {i} plus {i}?",
                max_tokens=32 + i % 129,
                model=SMOLLM2.name,
            )
            for i in range(requests)
        ]
    )


def through_system(system: LocalSystem, data: bytes) -> Measured:
    """Submit with the SDK and wait for `completed`; output tokens from the downloaded output file."""
    with system.client() as client:
        started = time.perf_counter()
        file = client.files.create(file=data, purpose="batch")
        batch = client.batches.create(input_file_id=file.id, endpoint=CHAT, max_price=50 * UNIT)
        done = client.batches.wait(batch.id, poll_s=0.2, timeout_s=600)
        seconds = time.perf_counter() - started
        if done.status != "completed" or done.output_file_id is None:
            raise RuntimeError(f"the batch ended {done.status}; see {system.workdir}/worker.log")
        output = client.files.content(done.output_file_id).decode().splitlines()
    tokens = sum(json.loads(line)["response"]["body"]["usage"]["completion_tokens"] for line in output)
    return Measured("system (1 miner node)", len(output), tokens, seconds)


def with_run_local(model_dir: Path, data: bytes, scratch: Path, threads: int | None) -> Measured:
    """`miner run-local --stages 1 --microbatches 1 --no-offload --max-batch-size 32 [--threads N]` on the
    same file."""
    source = scratch / "batch.jsonl"
    source.write_bytes(data)
    settings = RunSettings(
        stages=1, microbatches=1, offload=False, max_batch_size=MAX_BATCH_SIZE, threads=threads
    )
    summary = run_batch(model_dir, source, scratch / "out.jsonl", scratch / "errors.jsonl", settings)
    return Measured("miner run-local (1 stage)", summary.completed, summary.output_tokens, summary.seconds)


@dataclass(frozen=True)
class Placement:
    name: str
    miner_threads: int | None  # None: torch on all cores


PLACEMENTS = (
    Placement(f"miner on {MINER_THREADS} core, the system on the other (target)", MINER_THREADS),
    Placement("everything on both cores (reference)", None),
)


def run(scratch: Path, placement: Placement) -> tuple[Measured, Measured]:
    data = batch_file(REQUESTS)
    config = replace(real_model_config(miners=1, stages=1), miner_threads=placement.miner_threads)
    with LocalSystem(scratch / "system", config) as system:
        through_system(system, batch_file(4))  # the miner joins and loads its layers
        system_run = through_system(system, data)
    # after the system is down, so that nothing else of ours shares the cores
    local_run = with_run_local(system.model_dir, data, scratch, placement.miner_threads)
    return system_run, local_run


Outcome = tuple[Placement, Measured, Measured]  # the placement, the system's run, run-local's


def overhead(system_run: Measured, local_run: Measured) -> float:
    return 1 - system_run.tokens_per_s / local_run.tokens_per_s


def report(outcomes: list[Outcome]) -> Table:
    table = report_table(
        title=f"Output tokens/s of a {REQUESTS:,}-request batch: the whole system vs. `miner run-local` "
        f"(target: overhead at most {TARGET_OVERHEAD:.0%} with the miner on its own core)",
        caption=f"{SMOLLM2.name} on CPU; one miner node = one run-local stage (see bench/e2e_overhead.py); "
        f"{os.cpu_count()} shared cores, load average {os.getloadavg()[0]:.1f} at the end",
        columns=("placement", "run", "requests", "output tokens", "seconds", "output tokens/s"),
        left=("placement", "run"),
    )
    for placement, system_run, local_run in outcomes:
        for index, measured in enumerate((local_run, system_run)):
            table.add_row(
                placement.name if index == 0 else "",
                measured.name,
                f"{measured.requests:,}",
                f"{measured.output_tokens:,}",
                f"{measured.seconds:.1f}",
                f"{measured.tokens_per_s:.0f}",
            )
        same = (
            "same tokens" if system_run.output_tokens == local_run.output_tokens else "token counts differ!"
        )
        cost = overhead(system_run, local_run)
        verdict = ""
        if placement is PLACEMENTS[0]:
            verdict = "meets the target; " if cost <= TARGET_OVERHEAD else "misses the target; "
        table.add_row("", f"system overhead ({verdict}{same})", "", "", "", f"{cost:.0%}", style="bold")
    return table


def plot(outcomes: list[Outcome], path: Path) -> None:
    with figure(path, 1, len(outcomes), figsize=(6 * len(outcomes), 3.8), squeeze=False) as axes:
        for ax, (placement, system_run, local_run) in zip(axes[0], outcomes, strict=True):
            runs = (local_run, system_run)
            ax.bar([r.name for r in runs], [r.tokens_per_s for r in runs], color=["tab:grey", "tab:blue"])
            floor = local_run.tokens_per_s * (1 - TARGET_OVERHEAD)
            ax.axhline(floor, color="red", linestyle="--", label=f"{1 - TARGET_OVERHEAD:.0%} of run-local")
            ax.set_ylabel("output tokens/s")
            ax.set_title(f"{placement.name}\noverhead {overhead(system_run, local_run):.0%}", fontsize=9)
            ax.legend(loc="lower right")


def main() -> None:
    outcomes = []
    for placement in PLACEMENTS:
        with tempfile.TemporaryDirectory() as scratch:
            outcomes.append((placement, *run(Path(scratch), placement)))
    publish("e2e_overhead", [report(outcomes)], width=130, plot=partial(plot, outcomes))


if __name__ == "__main__":
    main()
