"""Relay overhead: output tokens/s of the planned 4-stage pipeline of `bench.latency_tolerance` when every
stage sits behind NAT and takes its messages through a relay (miner.transport.relay, run by the driver),
against the same pipeline with direct links, at 0 and 64 ms of one-way link latency. Every link is secured
(CURVE), as only secured links can be relayed; the baseline is the direct secured pipeline, same run.

Modes: direct; relay near (the relay next to the receivers: a relayed link is one hop of the link latency plus
the relay's forwarding); relay far (the relay adds the link latency again: a relayed link is two hops; at 0 ms
it is relay near, so it runs at 64 ms only). Each mode's microbatch count comes from the planner's rule
(coordinator.scheduling.microbatch) given the hop it really has: the link latency, or twice it for relay far,
and the work (sequences) follows from it as in `bench.link_security`. Direct and relayed runs alternate, a
round of one run per mode, five rounds; each relayed run's ratio is to the direct run of its round, and the
median of those ratios is the result, with their spread beside it to show the machine's noise. Target: at
64 ms, at most 10% of the throughput lost once the microbatch count accounts for the extra hop.

A control runs direct links with relay far's microbatch count: relay far against it is the relay's own cost
once the work in flight is the same, and it against direct what the extra microbatches cost this CPU.

Added latency: one request alone (one microbatch, 16 tokens) through each mode, in the first three rounds
(its time varies far less than throughput does); its time per token is the ring's round trip (1 / its steady
rate: between the 10th and 90th percentile of its tokens' arrivals), and the difference from direct, over the
4 links a token crosses, is what the relay adds per link.

It runs the small random-weight Llama of `bench.link_security` (per-message costs weigh most when each stage
computes little). The relay is a thread of the driver's process, so on this machine its forwarding (CURVE in
and out, for every message of every link) takes CPU from the stages, which keep its cores busy; a deployed
relay runs elsewhere. Run: `.venv/bin/python -m bench.relay_overhead` (or `make bench`, with every other
bench).
"""

from __future__ import annotations

import statistics
import tempfile
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from rich.console import Console
from rich.table import Table

from bench._report import figure, publish, report_table
from bench.latency_tolerance import (
    BATCH,
    MIN_MICROBATCHES_OF_WORK,
    NEW,
    STAGES,
    run,
)
from bench.link_security import small_model
from client_sdk.protocol.pipeline import microbatches

LATENCIES_MS = (0, 64)
REPEATS = 5
ALONE_REPEATS = 3  # of the rounds, those that also time one request alone
TARGET_LOSS = 0.10
TARGET_LATENCY_MS = 64


@dataclass(frozen=True)
class Mode:
    """How the stages are reached: directly, or all through a relay that is near (adds only its forwarding)
    or far (adds the link latency again)."""

    name: str
    relayed: frozenset[int]
    far: bool = False
    planned_as_far: bool = False  # the control: direct links, but as many microbatches as relay far keeps

    def relay_latency_ms(self, latency_ms: int) -> float:
        return float(latency_ms) if self.far else 0.0

    def hop_ms(self, latency_ms: int) -> float:
        """The one-way time of a link in this mode, as the planner is told it."""
        return latency_ms * (2 if self.far or self.planned_as_far else 1)


DIRECT = Mode("direct", frozenset())
NEAR = Mode("relay near", frozenset(range(STAGES)))
FAR = Mode("relay far", frozenset(range(STAGES)), far=True)
CONTROL = Mode("direct, far's count", frozenset(), planned_as_far=True)


def modes(latency_ms: int) -> tuple[Mode, ...]:
    return (DIRECT, NEAR, FAR, CONTROL) if latency_ms else (DIRECT, NEAR)


def timed_alone(mode: Mode) -> bool:
    """Whether one request alone is timed in this mode (the control differs from direct only in work)."""
    return mode is not CONTROL


@dataclass
class Runs:
    """Per mode at one link latency, in run order: the planned pipeline's microbatches and steady tokens/s,
    and one request's milliseconds per token."""

    microbatches: dict[str, int] = field(default_factory=dict)
    rates: dict[str, list[float]] = field(default_factory=dict)
    token_ms: dict[str, list[float]] = field(default_factory=dict)

    def ratios(self, mode: str) -> list[float]:
        """Each round's relayed tokens/s over the direct tokens/s of the same round."""
        return [r / d for d, r in zip(self.rates[DIRECT.name], self.rates[mode], strict=True)]

    def rate(self, mode: str) -> float:
        return statistics.median(self.rates[mode])

    def ms_per_token(self, mode: str) -> float:
        return statistics.median(self.token_ms[mode])


def planned_count(stage_ms: float, hop_ms: float) -> int:
    """The planner's microbatch count for equal stages over equal links of `hop_ms` (at least 2, as in
    `bench.link_security`)."""
    return max(2, microbatches([stage_ms] * STAGES, [hop_ms] * STAGES))


def relay_overhead(model: Path, stage_ms: float, console: Console) -> dict[int, Runs]:
    """Per latency: alternating rounds of one throughput run per mode (and, in the first ALONE_REPEATS rounds,
    one single-request run per mode)."""
    results = {}
    for latency in LATENCIES_MS:
        runs = Runs()
        for mode in modes(latency):
            runs.microbatches[mode.name] = planned_count(stage_ms, mode.hop_ms(latency))
            runs.rates[mode.name], runs.token_ms[mode.name] = [], []
        for round_ in range(REPEATS):
            for mode in modes(latency):
                count = runs.microbatches[mode.name]
                sequences = BATCH * max(count, MIN_MICROBATCHES_OF_WORK)
                relay = (mode.relayed, mode.relay_latency_ms(latency))
                outcome = run(model, latency, count, True, sequences, True, *relay)
                runs.rates[mode.name].append(outcome.steady_tokens_s)
                progress = f"{latency} ms, round {round_ + 1}, {mode.name}: {count} microbatches, "
                progress += f"{outcome.steady_tokens_s:.0f} tokens/s"
                if round_ < ALONE_REPEATS and timed_alone(mode):
                    alone = run(model, latency, 1, False, 1, True, *relay)
                    runs.token_ms[mode.name].append(1_000 / alone.steady_tokens_s)
                    progress += f"; one request {runs.token_ms[mode.name][-1]:.1f} ms per token"
                console.print(progress)
        results[latency] = runs
    return results


def throughput_table(results: dict[int, Runs], stage_ms: float) -> Table:
    table = report_table(
        title="Relayed stage links: planned pipeline, steady output tokens/s, every link CURVE "
        f"({REPEATS} alternating rounds; baseline: direct links, same run)",
        caption=f"stage time {stage_ms:.1f} ms (slowest stage, measured at 0 ms); planner's hop: the one-way "
        "time of a link in that mode, from which the microbatch count follows. Target: at "
        f"{TARGET_LATENCY_MS} ms, at most {TARGET_LOSS:.0%} of the direct throughput lost. The relay runs in "
        "the driver's process, on the 2 cores the stages keep busy. The control (direct, far's count) keeps "
        "as many microbatches as relay far over direct links: relay far / control is the relay's own cost "
        f"once the work in flight is the same ({far_over_control(results):.3f} here); control / direct is "
        "what the extra microbatches cost this CPU.",
        columns=(
            "link latency",
            "mode",
            "planner's hop",
            "microbatches",
            "tokens/s (median)",
            "relayed / direct",
            "rounds' spread",
            "target",
        ),
    )
    for latency, runs in results.items():
        for mode in modes(latency):
            ratios = runs.ratios(mode.name)
            ratio = statistics.median(ratios)
            relayed = mode is not DIRECT
            if mode.relayed and latency == TARGET_LATENCY_MS:
                verdict = "met" if ratio >= 1 - TARGET_LOSS else "missed"
            else:
                verdict = "-"
            table.add_row(
                f"{latency} ms",
                mode.name,
                f"{mode.hop_ms(latency):.0f} ms",
                str(runs.microbatches[mode.name]),
                f"{runs.rate(mode.name):.0f}",
                f"{ratio:.3f}" if relayed else "-",
                f"{min(ratios):.2f} - {max(ratios):.2f}" if relayed else "-",
                verdict,
            )
    return table


def far_over_control(results: dict[int, Runs]) -> float:
    """Median, over the rounds at the target latency, of relay far's tokens/s over the control's."""
    runs = results[TARGET_LATENCY_MS]
    return statistics.median(
        far / control for far, control in zip(runs.rates[FAR.name], runs.rates[CONTROL.name], strict=True)
    )


def latency_table(results: dict[int, Runs]) -> Table:
    table = report_table(
        title=f"Added latency: one request alone ({NEW} tokens, one microbatch), ms per token (median of "
        f"{ALONE_REPEATS}); a token crosses {STAGES} links",
        caption="ms per token: the ring's round trip (1 / the request's steady rate). Added per link: (mode "
        f"- direct) / {STAGES}; expected: the relay's forwarding cost when near, plus one link latency when "
        "far.",
        columns=("link latency", "mode", "ms per token", "added per token", "added per link"),
    )
    for latency, runs in results.items():
        direct = runs.ms_per_token(DIRECT.name)
        for mode in filter(timed_alone, modes(latency)):
            added = runs.ms_per_token(mode.name) - direct
            table.add_row(
                f"{latency} ms",
                mode.name,
                f"{runs.ms_per_token(mode.name):.1f}",
                f"{added:+.1f} ms" if mode is not DIRECT else "-",
                f"{added / STAGES:+.2f} ms" if mode is not DIRECT else "-",
            )
    return table


def plot(results: dict[int, Runs], path: Path) -> None:
    with figure(path, 1, 2, figsize=(10, 3.8)) as (ax_rate, ax_token):
        latencies = list(results)
        everyone = modes(max(latencies))
        width = 0.8 / len(everyone)
        for i, mode in enumerate(everyone):
            xs = [
                x + (i - (len(everyone) - 1) / 2) * width
                for x, ms in enumerate(latencies)
                if mode in modes(ms)
            ]
            shown = [results[ms] for ms in latencies if mode in modes(ms)]
            ax_rate.bar(xs, [runs.rate(mode.name) for runs in shown], width, label=mode.name)
            if timed_alone(mode):
                ax_token.bar(xs, [runs.ms_per_token(mode.name) for runs in shown], width, label=mode.name)
        for ax in (ax_rate, ax_token):
            ax.set_xticks(range(len(latencies)), [f"{ms} ms" for ms in latencies])
            ax.set_xlabel("one-way link latency")
        ax_rate.set_ylabel("steady output tokens/s")
        ax_rate.set_title(f"Planned {STAGES}-stage pipeline, median of {REPEATS}")
        ax_rate.legend()
        ax_token.set_ylabel("ms per token")
        ax_token.set_title(f"One request alone (the ring's round trip), median of {ALONE_REPEATS}")


def main() -> None:
    console = Console(width=120)
    with tempfile.TemporaryDirectory() as tmp:
        model, stage_ms = small_model(Path(tmp))
        results = relay_overhead(model, stage_ms, console)
    tables = (throughput_table(results, stage_ms), latency_table(results))
    publish("relay_overhead", tables, width=120, plot=partial(plot, results))


if __name__ == "__main__":
    main()
