"""Link security's price: output tokens/s of the planned 4-stage pipeline of `bench.latency_tolerance` with
its links encrypted and authenticated (ZeroMQ CURVE, as between miner nodes) against the same links in plain
TCP, at 0 and 64 ms of one-way link latency. Plain and secured runs alternate, five pairs; each pair's ratio
compares runs taken a few seconds apart, and the median of those ratios is the result (baseline: plain, same
run), with the pairs' spread beside it to show the machine's noise. Target: at most 5% of the throughput lost.

It runs a small random-weight Llama (8 layers of width 256, with a tokenizer and chat template) rather than
the real model: link costs are per message, so the smaller each stage's compute, the larger their share of a
step; a small model is the worst case for CURVE's price (and keeps the 20 pipelines this takes to minutes).
"""

from __future__ import annotations

import statistics
import tempfile
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from rich.table import Table

from bench._report import figure, publish, report_table
from bench.latency_tolerance import (
    BATCH,
    MIN_MICROBATCHES_OF_WORK,
    STAGES,
    naive_sequences,
    run,
)
from client_sdk.protocol.pipeline import microbatches
from miner.tiny_checkpoint import build_tiny_model

LATENCIES_MS = (0, 64)
MODEL = {"num_hidden_layers": 8, "hidden_size": 256, "intermediate_size": 688, "num_attention_heads": 8}
REPEATS = 5
TARGET_LOSS = 0.05


def small_model(directory: Path) -> tuple[Path, float]:
    """The small random Llama built in `directory`, and its slowest stage's time in the naive pipeline at
    0 ms, from which the planned microbatch counts follow."""
    model = build_tiny_model(directory / "model", "llama", **MODEL)
    return model, run(model, 0, 1, False, naive_sequences(0)).stage_ms


@dataclass(frozen=True)
class Pairs:
    """Steady tokens/s of alternating plain and CURVE runs at one link latency, in run order."""

    plain: list[float]
    secured: list[float]

    @property
    def ratios(self) -> list[float]:
        return [secured / plain for plain, secured in zip(self.plain, self.secured, strict=True)]


def curve_overhead(model: Path, stage_ms: float) -> dict[int, Pairs]:
    """Per latency: the planned pipeline's steady tokens/s over plain links and over CURVE links."""
    pairs = {}
    for latency in LATENCIES_MS:
        count = max(2, microbatches([stage_ms] * STAGES, [float(latency)] * STAGES))
        sequences = BATCH * max(count, MIN_MICROBATCHES_OF_WORK)
        rates: dict[bool, list[float]] = {False: [], True: []}
        for _ in range(REPEATS):
            for secured in (False, True):
                rates[secured].append(run(model, latency, count, True, sequences, secured).steady_tokens_s)
        pairs[latency] = Pairs(rates[False], rates[True])
    return pairs


def curve_table(pairs: dict[int, Pairs]) -> Table:
    table = report_table(
        title="CURVE on the stage links: planned pipeline, steady output tokens/s "
        f"({REPEATS} alternating pairs of runs; baseline: plain TCP, same run)",
        columns=(
            "link latency",
            "plain (median)",
            "CURVE (median)",
            "CURVE / plain",
            "pairs' spread",
            "target",
        ),
    )
    for latency, runs in pairs.items():
        ratio = statistics.median(runs.ratios)
        table.add_row(
            f"{latency} ms",
            f"{statistics.median(runs.plain):.0f}",
            f"{statistics.median(runs.secured):.0f}",
            f"{ratio:.3f}",
            f"{min(runs.ratios):.2f} - {max(runs.ratios):.2f}",
            "met" if ratio >= 1 - TARGET_LOSS else f"missed (more than {TARGET_LOSS:.0%} lost)",
        )
    return table


def plot(pairs: dict[int, Pairs], path: Path) -> None:
    with figure(path, figsize=(6, 3.5)) as ax:
        latencies = list(pairs)
        width = 0.35
        xs = range(len(latencies))
        plain = [statistics.median(pairs[ms].plain) for ms in latencies]
        secured = [statistics.median(pairs[ms].secured) for ms in latencies]
        ax.bar([x - width / 2 for x in xs], plain, width, label="plain TCP")
        ax.bar([x + width / 2 for x in xs], secured, width, label="CURVE")
        ax.set_xticks(list(xs), [f"{ms} ms" for ms in latencies])
        ax.set_xlabel("one-way link latency")
        ax.set_ylabel("steady output tokens/s")
        ax.set_title(f"{STAGES}-stage pipeline, median of {REPEATS} runs")
        ax.legend()


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        model, stage_ms = small_model(Path(tmp))
        pairs = curve_overhead(model, stage_ms)
    publish("link_security", [curve_table(pairs)], width=120, plot=partial(plot, pairs))


if __name__ == "__main__":
    main()
