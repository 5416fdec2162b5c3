"""Our engine against Hugging Face transformers `generate`, on SmolLM2-135M-Instruct, one stage holding the
whole model, on the CPU (float32, torch on all cores for both).

The workload: 64 chat questions (the chat template applied, as `miner run-local` does), each answered in up
to 128 tokens and stopped at the model's end-of-turn token, so answers end at different lengths, as real
ones do. Three setups, each timed on both sides in the same round (rounds alternate, medians are reported):

- batch 1: requests one at a time (the first 8 questions): the engine with one sequence in flight,
  `generate` on one prompt;
- batch 16: the engine with 16 sequences in flight, refilled as they finish; `generate` in static batches of
  16, left-padded, each running until its last request stops;
- batch 64: the engine with `miner run-local`'s defaults (64 sequences per microbatch, one microbatch, no
  offloading on a CPU); `generate` on all 64 at once.

Targets: at batch 64 at least 2x `generate`'s best static batch (the best of its three setups), at least 1x
at batches 1 and 16, and at least 35% of the compute roofline at batch 64. Greedy on both sides; the table
reports how many answers came out equal token for token.

Rooflines are measured in the same run: the compute roof is the best float32 matrix product rate (a
2048-square product with torch's default kernel and with oneDNN's packed one), the bandwidth roof the best
copy rate of a 256 MiB tensor. A run's work is counted from its answers: FLOPs are 2 per weight of the
decoder layers for every position run through them (prompt and output, the last output token excepted), 2
per LM-head weight for every sampled token, and 4 * heads * head_dim per layer for every (query, key) pair
of causal attention; bytes are the weights read once per forward step (the runner's own step count) plus
the cached keys and values each decoding token reads.

The stage's memory is measured in a fresh process (see bench/_memory.py): its peak against its configured
budget, the weights plus the KV page pools.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import torch
from rich.table import Table
from transformers import AutoModelForCausalLM

from bench._chat import QUESTIONS, chat_prompts
from bench._memory import memory_in_use, peak_memory, stage_budget
from bench._report import figure, publish, report_table
from bench._roofline import ModelCost, Roofs, measure_roofs
from client_sdk.protocol.sampling import SamplingParams
from miner.engine.engine import Engine
from miner.kv.cache import PAGE_SIZE
from miner.model.config import ModelConfig
from miner.model.packaged import SMOLLM2, ensure
from miner.model.shard import StageShard
from miner.pipeline.batch import RunSettings, load_tokenizer, stop_token_ids
from miner.pipeline.stage import CacheSettings

MAX_TOKENS = 128
ROUNDS = 3
DEFAULT_SEQS = RunSettings().max_batch_size
TARGET_SPEEDUP = 2.0  # at batch 64, over generate's best static batch
TARGET_COMPUTE_ROOF = 0.35  # at batch 64


@dataclass(frozen=True)
class Setup:
    name: str
    requests: int  # the first this many questions
    engine_seqs: int  # sequences the engine keeps in flight
    static_batch: int  # generate's batch size


SETUPS = (
    Setup("batch 1", 8, 1, 1),
    Setup("batch 16", len(QUESTIONS), 16, 16),
    Setup("batch 64", len(QUESTIONS), DEFAULT_SEQS, len(QUESTIONS)),
)


@dataclass(frozen=True)
class Workload:
    prompts: list[list[int]]
    stops: tuple[int, ...]


def workload(model_dir: Path) -> Workload:
    """The questions as `miner run-local` tokenizes chat lines, and the model's stop tokens."""
    tokenizer = load_tokenizer(model_dir)
    return Workload(chat_prompts(tokenizer), stop_token_ids(tokenizer, model_dir))


@dataclass(frozen=True)
class Run:
    outputs: list[list[int]]
    seconds: float
    steps: int  # forward passes

    @property
    def output_tokens(self) -> int:
        return sum(map(len, self.outputs))

    @property
    def tokens_per_s(self) -> float:
        return self.output_tokens / self.seconds


def new_engine(model_dir: Path, prompts: list[list[int]], seqs: int) -> Engine:
    """One stage with `miner run-local`'s cache rule: pages for `seqs` of the longest request, no
    offloading."""
    shard = StageShard.load(model_dir, 0, ModelConfig.load(model_dir).num_layers)
    pages = seqs * -(-(max(map(len, prompts)) + MAX_TOKENS) // PAGE_SIZE)
    budget = CacheSettings().token_budget
    return Engine([shard], local_pages=pages, max_seqs=seqs, token_budget=budget)


def run_engine(model_dir: Path, work: Workload, setup: Setup) -> Run:
    prompts = work.prompts[: setup.requests]
    engine = new_engine(model_dir, prompts, setup.engine_seqs)
    params = [SamplingParams(MAX_TOKENS, stop_token_ids=work.stops)] * len(prompts)
    started = time.perf_counter()
    outputs = engine.generate(prompts, params)
    seconds = time.perf_counter() - started
    if engine.preemptions:
        raise RuntimeError("the KV budget holds every running request: no preemption expected")
    return Run(outputs, seconds, engine.steps)


@torch.inference_mode()
def run_generate(model: Any, work: Workload, setup: Setup) -> Run:
    """Static batches, left-padded; each answer cut after its first stop token."""
    prompts = work.prompts[: setup.requests]
    pad = work.stops[0]
    outputs: list[list[int]] = []
    steps = 0
    started = time.perf_counter()
    for first in range(0, len(prompts), setup.static_batch):
        batch = prompts[first : first + setup.static_batch]
        width = max(map(len, batch))
        ids = torch.tensor([[pad] * (width - len(p)) + p for p in batch])
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in batch])
        out = model.generate(
            input_ids=ids,
            attention_mask=mask,
            max_new_tokens=MAX_TOKENS,
            do_sample=False,
            temperature=None,
            top_p=None,
            top_k=None,
            eos_token_id=list(work.stops),
            pad_token_id=pad,
        )
        steps += out.shape[1] - width
        outputs += [cut_at_stop(row[width:].tolist(), work.stops) for row in out]
    return Run(outputs, time.perf_counter() - started, steps)


def cut_at_stop(tokens: list[int], stops: tuple[int, ...]) -> list[int]:
    """The answer up to and including its first stop token (generate pads finished rows after it)."""
    for index, token in enumerate(tokens):
        if token in stops:
            return tokens[: index + 1]
    return tokens


@dataclass
class Timed:
    setup: Setup
    engine: list[Run] = field(default_factory=list)
    generate: list[Run] = field(default_factory=list)

    def median(self, runner: str) -> Run:
        runs: list[Run] = sorted(getattr(self, runner), key=lambda r: r.seconds)
        return runs[len(runs) // 2]

    def speedup(self) -> float:
        """Median over rounds of our tokens/s over generate's in the same round."""
        return statistics.median(
            e.tokens_per_s / g.tokens_per_s for e, g in zip(self.engine, self.generate, strict=True)
        )

    def equal_outputs(self) -> int:
        ours, theirs = self.engine[-1].outputs, self.generate[-1].outputs
        return sum(a == b for a, b in zip(ours, theirs, strict=True))


def time_all(model_dir: Path, work: Workload) -> tuple[list[Timed], Roofs]:
    """Every setup on both sides, ROUNDS times; the roofs measured before each round, the best kept (other
    jobs on the machine can only make a measurement slower)."""
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    model.eval()  # type: ignore[no-untyped-call]  # transformers leaves PreTrainedModel.eval unannotated
    timed = [Timed(setup) for setup in SETUPS]
    run_engine(model_dir, work, SETUPS[0])  # warm-up for both sides' kernels
    run_generate(model, work, SETUPS[0])
    roofs = []
    for round_number in range(ROUNDS):
        roofs.append(measure_roofs())
        for entry in timed:
            entry.engine.append(run_engine(model_dir, work, entry.setup))
            entry.generate.append(run_generate(model, work, entry.setup))
            print(
                f"round {round_number + 1}/{ROUNDS}, {entry.setup.name}: "
                f"engine {entry.engine[-1].tokens_per_s:.1f}, "
                f"generate {entry.generate[-1].tokens_per_s:.1f} tokens/s",
                flush=True,
            )
    return timed, Roofs(max(r.flops_per_s for r in roofs), max(r.bytes_per_s for r in roofs))


@dataclass(frozen=True)
class Row:
    timed: Timed
    runner: str
    run: Run
    compute: float  # fraction of the compute roof
    bandwidth: float  # fraction of the bandwidth roof


def rows(timed: list[Timed], work: Workload, cost: ModelCost, roofs: Roofs) -> list[Row]:
    out = []
    for entry in timed:
        prompts = work.prompts[: entry.setup.requests]
        for runner in ("engine", "generate"):
            run = entry.median(runner)
            compute = cost.flops(prompts, run.outputs) / run.seconds / roofs.flops_per_s
            bandwidth = cost.bytes(run.steps, prompts, run.outputs) / run.seconds / roofs.bytes_per_s
            out.append(Row(entry, runner, run, compute, bandwidth))
    return out


def verdicts(timed: list[Timed], table_rows: list[Row]) -> list[str]:
    best_static = max(entry.median("generate").tokens_per_s for entry in timed)
    at_64 = timed[-1].median("engine")
    lines = [
        "batch 64 (engine defaults) vs generate's best static batch: "
        f"{at_64.tokens_per_s / best_static:.2f}x "
        f"(target >= {TARGET_SPEEDUP:.0f}x)"
    ]
    lines += [f"{entry.setup.name}: {entry.speedup():.2f}x (target >= 1x)" for entry in timed[:-1]]
    compute = next(r.compute for r in table_rows if r.timed is timed[-1] and r.runner == "engine")
    lines.append(f"compute roofline at batch 64: {compute:.0%} (target >= {TARGET_COMPUTE_ROOF:.0%})")
    return lines


def speed_table(table_rows: list[Row], roofs: Roofs, work: Workload) -> Table:
    table = report_table(
        title=(
            f"Engine vs transformers generate on {SMOLLM2.name}: chat questions, up to {MAX_TOKENS} tokens, "
            f"float32, one stage, {torch.get_num_threads()} CPU threads each"
        ),
        caption=(
            f"Roofs measured in this run (the best of {ROUNDS} measurements, one before each round): "
            f"{roofs.flops_per_s / 1e9:.0f} GFLOP/s, {roofs.bytes_per_s / 1e9:.1f} GB/s. {ROUNDS} rounds "
            "alternating both sides; the median round is shown, the ratio is the median of the rounds' "
            "ratios. Batch 1 runs the first "
            f"{SETUPS[0].requests} questions, the others all {len(work.prompts)}."
        ),
        columns=(
            "setup",
            "runner",
            "output tokens/s",
            "ours / theirs",
            "compute roof",
            "bandwidth roof",
            "forward steps",
            "equal answers",
        ),
        left=("setup", "runner"),
    )
    for row in table_rows:
        setup = row.timed.setup
        ours = row.runner == "engine"
        table.add_row(
            setup.name if ours else "",
            f"engine, {setup.engine_seqs} in flight" if ours else f"generate, static {setup.static_batch}",
            f"{row.run.tokens_per_s:.1f}",
            f"{row.timed.speedup():.2f}x" if ours else "",
            f"{row.compute:.0%}",
            f"{row.bandwidth:.0%}",
            str(row.run.steps),
            f"{row.timed.equal_outputs()}/{setup.requests}" if ours else "",
        )
    return table


def measure_memory(model_dir: Path) -> dict[str, int]:
    """The stage's budget and its peak while serving batch 64 with its defaults (in a fresh process)."""
    cpu = torch.device("cpu")
    work = workload(model_dir)
    params = [SamplingParams(MAX_TOKENS, stop_token_ids=work.stops)] * len(work.prompts)
    before_load = memory_in_use(cpu)
    engine = new_engine(model_dir, work.prompts, DEFAULT_SEQS)
    budget = stage_budget(engine.pipeline.shards[0], engine.pipeline.caches[0])
    # The first pass pages in torch's kernels (library code, not stage memory); the second is measured.
    engine.generate(work.prompts[:8], params[:8])
    with peak_memory(cpu) as peak:
        engine.generate(work.prompts, params)
    return {
        "weight_bytes": budget.weight_bytes,
        "kv_device_bytes": budget.kv_device_bytes,
        "budget_bytes": budget.resident_on(cpu),
        "peak_bytes": peak.peak_bytes - before_load,
        "file_pages_paged_in": peak.file_pages_paged_in,
        "pages": engine.pipeline.pages_per_microbatch,
    }


def measure_memory_in_subprocess(model_dir: Path) -> dict[str, int]:
    """A fresh process, so nothing this one allocated before (transformers, other benchmarks) is counted or
    reused by the stage."""
    done = subprocess.run(
        [sys.executable, "-m", "bench.engine_vs_hf", "--measure-memory", str(model_dir)],
        cwd=Path(__file__).parent.parent,
        check=True,
        capture_output=True,
        text=True,
    )
    measured: dict[str, int] = json.loads(done.stdout.strip().splitlines()[-1])  # measure_memory's dict
    return measured


def mib(count: int) -> str:
    return f"{count / 2**20:.1f} MiB"


def memory_table(memory: dict[str, int]) -> Table:
    table = report_table(
        title="Peak memory of the stage (CPU, batch 64, engine defaults) against its budget",
        caption=(
            "Budget: the weights (the tied LM head's packed copy beside the embedding included) and "
            "the KV page pools. Peak: anonymous resident memory (Linux VmHWM less file-backed pages) "
            "during a second pass in a fresh process, over the process's before the stage was loaded; it "
            "counts tensors, step activations, allocator slack and Python objects. File pages paged in "
            "while measuring: "
            f"{memory['file_pages_paged_in']} B."
        ),
        columns=("weights", "KV pools", "budget", "measured peak", "within"),
    )
    table.add_row(
        mib(memory["weight_bytes"]),
        f"{mib(memory['kv_device_bytes'])} ({memory['pages']} pages of {PAGE_SIZE})",
        mib(memory["budget_bytes"]),
        mib(memory["peak_bytes"]),
        "yes" if memory["peak_bytes"] <= memory["budget_bytes"] else "NO",
    )
    return table


def plot(table_rows: list[Row], memory: dict[str, int], path: Path) -> None:
    with figure(path, 1, 3, figsize=(15, 4.5)) as (ax_speed, ax_roof, ax_memory):
        names = [s.name for s in SETUPS]
        for offset, runner in ((-0.2, "engine"), (0.2, "generate")):
            picked = [r for r in table_rows if r.runner == runner]
            xs = [i + offset for i in range(len(picked))]
            ax_speed.bar(xs, [r.run.tokens_per_s for r in picked], 0.4, label=runner)
            ax_roof.bar(xs, [100 * r.compute for r in picked], 0.4, label=runner)
        for ax in (ax_speed, ax_roof):
            ax.set_xticks(range(len(names)), names)
            ax.legend()
        ax_speed.set_ylabel("output tokens/s (median round)")
        ax_speed.set_title("Throughput")
        ax_roof.axhline(100 * TARGET_COMPUTE_ROOF, color="red", linestyle="--")
        ax_roof.set_ylabel("% of the measured compute roof")
        ax_roof.set_title("Compute roofline (dashed: target at batch 64)")
        ax_memory.bar(0, memory["weight_bytes"] / 2**20, 0.6, label="weights", color="C2")
        ax_memory.bar(
            0,
            memory["kv_device_bytes"] / 2**20,
            0.6,
            bottom=memory["weight_bytes"] / 2**20,
            label="KV",
            color="C3",
        )
        ax_memory.bar(1, memory["peak_bytes"] / 2**20, 0.6, color="C5", label="measured peak")
        ax_memory.set_xticks(range(2), ["budget", "measured peak"])
        ax_memory.set_ylabel("MiB")
        ax_memory.set_title("Stage memory (CPU)")
        ax_memory.legend(loc="lower center")


def main() -> None:
    model_dir = ensure()
    work = workload(model_dir)
    memory = measure_memory_in_subprocess(model_dir)
    timed, roofs = time_all(model_dir, work)
    table_rows = rows(timed, work, ModelCost.of(ModelConfig.load(model_dir)), roofs)
    publish(
        "engine_vs_hf",
        [speed_table(table_rows, roofs, work), memory_table(memory)],
        width=150,
        notes=verdicts(timed, table_rows),
        plot=partial(plot, table_rows, memory),
    )


if __name__ == "__main__":
    if sys.argv[1:2] == ["--measure-memory"]:
        print(json.dumps(measure_memory(Path(sys.argv[2]))))
    else:
        main()
