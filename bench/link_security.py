"""Link security's price: output tokens/s of the planned 4-stage pipeline of `bench.latency_tolerance` with
its links encrypted and authenticated (ZeroMQ CURVE, as between miner nodes) against the same links in plain
TCP, at 0 and 64 ms of one-way link latency. Plain and secured runs alternate, three of each; the medians are
compared (baseline: plain, same run). Target: at most 5% of the throughput lost.
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

from bench.latency_tolerance import (
    BATCH,
    MIN_MICROBATCHES_OF_WORK,
    MODEL,
    RESULTS,
    STAGES,
    naive_sequences,
    run,
)
from coordinator.scheduling.microbatch import microbatches
from miner.tiny_checkpoint import build_checkpoint

LATENCIES_MS = (0, 64)
REPEATS = 3
TARGET_LOSS = 0.05


def curve_overhead(model: Path, stage_ms: float) -> dict[int, tuple[float, float]]:
    """Per latency: the planned pipeline's median steady tokens/s over plain links and over CURVE links."""
    medians = {}
    for latency in LATENCIES_MS:
        count = max(2, microbatches([stage_ms] * STAGES, [float(latency)] * STAGES))
        sequences = BATCH * max(count, MIN_MICROBATCHES_OF_WORK)
        rates: dict[bool, list[float]] = {False: [], True: []}
        for _ in range(REPEATS):
            for secured in (False, True):
                rates[secured].append(run(model, latency, count, True, sequences, secured).steady_tokens_s)
        medians[latency] = (statistics.median(rates[False]), statistics.median(rates[True]))
    return medians


def curve_table(medians: dict[int, tuple[float, float]]) -> Table:
    table = Table(
        title="CURVE on the stage links: planned pipeline, steady output tokens/s "
        f"(median of {REPEATS} alternating runs each; baseline: plain TCP, same run)",
    )
    for column in ("link latency", "plain tokens/s", "CURVE tokens/s", "CURVE / plain", "target"):
        table.add_column(column, justify="right")
    for latency, (plain, secured) in medians.items():
        ratio = secured / plain
        table.add_row(
            f"{latency} ms",
            f"{plain:.0f}",
            f"{secured:.0f}",
            f"{ratio:.3f}",
            "met" if ratio >= 1 - TARGET_LOSS else f"missed (more than {TARGET_LOSS:.0%} lost)",
        )
    return table


def plot(medians: dict[int, tuple[float, float]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    latencies = list(medians)
    width = 0.35
    xs = range(len(latencies))
    ax.bar([x - width / 2 for x in xs], [medians[ms][0] for ms in latencies], width, label="plain TCP")
    ax.bar([x + width / 2 for x in xs], [medians[ms][1] for ms in latencies], width, label="CURVE")
    ax.set_xticks(list(xs), [f"{ms} ms" for ms in latencies])
    ax.set_xlabel("one-way link latency")
    ax.set_ylabel("steady output tokens/s")
    ax.set_title(f"{STAGES}-stage pipeline, median of {REPEATS} runs")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    console = Console(width=120)
    with tempfile.TemporaryDirectory() as tmp:
        model = build_checkpoint("llama", Path(tmp) / "model", **MODEL)
        stage_ms = run(model, 0, 1, False, naive_sequences(0)).stage_ms
        medians = curve_overhead(model, stage_ms)
    table = curve_table(medians)
    RESULTS.mkdir(exist_ok=True)
    with (RESULTS / "link_security.txt").open("w") as handle:
        for out in (console, Console(file=handle, width=120)):
            out.print(table)
    plot(medians, RESULTS / "link_security.png")
    console.print(f"wrote {RESULTS / 'link_security.txt'} and {RESULTS / 'link_security.png'}")


if __name__ == "__main__":
    main()
