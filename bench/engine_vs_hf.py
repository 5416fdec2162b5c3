"""Our engine against Hugging Face transformers `generate` on one stage holding the whole model (CPU).

An offline workload in the shape of DeServe's (prompt and output lengths drawn uniformly, every request known
up front), scaled down to a small random Llama on a 2-core CPU. Our engine batches continuously: a finished
request's slot is refilled at once. transformers runs static batches of the same size, left-padded, each
running until its longest request is done (shorter ones are cut to their length afterwards). Output tokens/s
counts the tokens each request asked for. Greedy decoding on both sides, and the outputs are checked equal
token for token before anything is reported, so both produced the same tokens.

The stage's memory is measured in a fresh process (see bench/_memory.py): its peak against its configured
budget, the weights plus the KV page pools.
"""

from __future__ import annotations

import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import torch
from rich.console import Console
from rich.table import Table
from transformers import AutoConfig, AutoModelForCausalLM

from bench._memory import memory_in_use, peak_memory, stage_budget
from miner.engine.engine import Engine
from miner.engine.sequence import SamplingParams
from miner.model.shard import StageShard

RESULTS = Path(__file__).parent / "results"
MODEL: dict[str, Any] = {
    "vocab_size": 2048,
    "hidden_size": 256,
    "intermediate_size": 704,
    "num_hidden_layers": 4,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "max_position_embeddings": 1024,
    "initializer_range": 0.15,  # varied continuations (the default 0.02 repeats one token)
    "rms_norm_eps": 1e-6,
}
SEED = 0
REQUESTS = 64
PROMPT_LENS = (16, 128)  # uniform, inclusive
OUTPUT_LENS = (16, 128)
BATCH = 16  # our engine's running sequences = transformers' static batch size
PAGE_SIZE = 16
TOKEN_BUDGET = 256  # tokens per engine step (prefill chunks + decodes)
# Room for BATCH requests of the longest possible length: the KV budget of the stage.
KV_PAGES = BATCH * -(-(PROMPT_LENS[1] + OUTPUT_LENS[1]) // PAGE_SIZE)
ROUNDS = 5  # engine and transformers alternate, so machine load hits both alike; medians are reported
# One thread each: the 2 cores are shared with other jobs, and with two threads a preempted thread stalls
# every op at its barrier (rounds then took 10-20x longer, unevenly between the two sides).
THREADS = 1


@dataclass(frozen=True)
class Workload:
    prompts: list[list[int]]
    output_lens: list[int]

    @property
    def output_tokens(self) -> int:
        return sum(self.output_lens)


def workload() -> Workload:
    rng = random.Random(SEED)
    prompts = [
        [rng.randrange(MODEL["vocab_size"]) for _ in range(rng.randint(*PROMPT_LENS))]
        for _ in range(REQUESTS)
    ]
    return Workload(prompts, [rng.randint(*OUTPUT_LENS) for _ in range(REQUESTS)])


def build_checkpoint(directory: Path) -> Path:
    torch.manual_seed(SEED)
    model = AutoModelForCausalLM.from_config(AutoConfig.for_model("llama", **MODEL), dtype=torch.float32)
    model.save_pretrained(directory, safe_serialization=True)
    return directory


def new_engine(checkpoint: Path) -> Engine:
    shard = StageShard.load(checkpoint, 0, MODEL["num_hidden_layers"])
    return Engine(
        [shard], page_size=PAGE_SIZE, local_pages=KV_PAGES, max_seqs=BATCH, token_budget=TOKEN_BUDGET
    )


@dataclass(frozen=True)
class Timing:
    wall_s: float
    cpu_s: float  # this process's CPU time: less sensitive to other jobs on the machine


def timed(run: Callable[[], list[list[int]]]) -> tuple[list[list[int]], Timing]:
    wall, cpu = time.perf_counter(), time.process_time()
    outputs = run()
    return outputs, Timing(time.perf_counter() - wall, time.process_time() - cpu)


def run_engine(engine: Engine, work: Workload) -> list[list[int]]:
    return engine.generate(work.prompts, [SamplingParams(max_tokens=n) for n in work.output_lens])


@torch.inference_mode()
def run_transformers(model: torch.nn.Module, work: Workload) -> list[list[int]]:
    outputs: list[list[int]] = []
    for first in range(0, REQUESTS, BATCH):
        prompts = work.prompts[first : first + BATCH]
        lens = work.output_lens[first : first + BATCH]
        width = max(map(len, prompts))
        ids = torch.tensor([[0] * (width - len(p)) + p for p in prompts])
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
        out = model.generate(
            input_ids=ids,
            attention_mask=mask,
            max_new_tokens=max(lens),
            do_sample=False,
            eos_token_id=None,
            pad_token_id=0,
        )
        outputs += [row[width : width + n].tolist() for row, n in zip(out, lens, strict=True)]
    return outputs


def measure_memory(checkpoint: Path) -> dict[str, int]:
    """The stage's budget and its peak while serving the workload (run in a fresh process, see main)."""
    torch.set_num_threads(THREADS)
    cpu = torch.device("cpu")
    work = workload()
    before_load = memory_in_use(cpu)
    engine = new_engine(checkpoint)
    budget = stage_budget(engine.pipeline.shards[0], engine.pipeline.caches[0])
    # The first pass pages in torch's kernels (library code, not stage memory); the second is measured.
    run_engine(engine, work)
    with peak_memory(cpu) as peak:
        run_engine(engine, work)
    return {
        "weight_bytes": budget.weight_bytes,
        "kv_device_bytes": budget.kv_device_bytes,
        "kv_host_bytes": budget.kv_host_bytes,
        "budget_bytes": budget.resident_on(cpu),
        "peak_bytes": peak.peak_bytes - before_load,
        "file_pages_paged_in": peak.file_pages_paged_in,
    }


def measure_memory_in_subprocess(checkpoint: Path) -> dict[str, int]:
    """A fresh process, so nothing this one allocated before (other benchmarks, transformers) is counted or
    reused by the stage."""
    done = subprocess.run(
        [sys.executable, "-m", "bench.engine_vs_hf", "--measure-memory", str(checkpoint)],
        cwd=Path(__file__).parent.parent,
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


@dataclass
class Rounds:
    engine: list[Timing]
    transformers: list[Timing]
    equal_outputs: int

    def speedup(self, field: str) -> float:
        """Median over rounds of transformers' time over ours in the same round, by wall_s or cpu_s."""
        ratios = [
            getattr(t, field) / getattr(o, field) for t, o in zip(self.transformers, self.engine, strict=True)
        ]
        return statistics.median(ratios)


def time_both(checkpoint: Path, work: Workload) -> Rounds:
    model = AutoModelForCausalLM.from_pretrained(checkpoint, dtype=torch.float32).eval()
    rounds = Rounds([], [], 0)
    for _ in range(ROUNDS):
        engine = new_engine(checkpoint)
        ours, timing = timed(partial(run_engine, engine, work))
        rounds.engine.append(timing)
        if engine.preemptions:
            raise RuntimeError("the KV budget should hold every running request: no preemption expected")
        theirs, timing = timed(partial(run_transformers, model, work))
        rounds.transformers.append(timing)
        different = [i for i, (a, b) in enumerate(zip(ours, theirs, strict=True)) if a != b]
        if different:
            raise RuntimeError(f"greedy outputs differ from transformers for requests {different}")
        rounds.equal_outputs = len(ours)
    return rounds


def tokens_computed(work: Workload) -> tuple[int, int]:
    """Token positions each side runs through the model: ours, every prompt and output token once (the last
    output token is never fed back); transformers, every row of a static batch at the batch's widest prompt
    and for its longest output."""
    ours = sum(len(p) + n - 1 for p, n in zip(work.prompts, work.output_lens, strict=True))
    theirs = 0
    for first in range(0, REQUESTS, BATCH):
        prompts = work.prompts[first : first + BATCH]
        theirs += len(prompts) * (max(map(len, prompts)) + max(work.output_lens[first : first + BATCH]) - 1)
    return ours, theirs


def mib(count: int) -> str:
    return f"{count / 2**20:.1f} MiB"


def tables(work: Workload, rounds: Rounds, memory: dict[str, int]) -> list[Table]:
    ours_tokens, their_tokens = tokens_computed(work)
    speed = Table(
        title=(
            f"Engine vs transformers generate: {REQUESTS} requests, prompts U{list(PROMPT_LENS)}, outputs "
            f"U{list(OUTPUT_LENS)} tokens, batch {BATCH}, float32, {THREADS} CPU thread each"
        ),
        caption=(
            f"{work.output_tokens} output tokens requested. {ROUNDS} rounds, each running ours then "
            "transformers; tokens/s from the median wall time, ratios the median of the rounds' ratios "
            "(the CPU is shared with other jobs, so wall times vary; CPU seconds less). Greedy outputs "
            "equal token for token in every round."
        ),
    )
    columns = (
        "runner",
        "output tokens/s",
        "wall s per round",
        "CPU s per round",
        "positions computed",
        "equal",
    )
    for column in columns:
        speed.add_column(column, justify="left" if column == "runner" else "right")
    for name, runs, positions, equal in (
        (
            "our engine (continuous batching)",
            rounds.engine,
            ours_tokens,
            f"{rounds.equal_outputs}/{REQUESTS}",
        ),
        ("transformers generate (static batches)", rounds.transformers, their_tokens, ""),
    ):
        speed.add_row(
            name,
            f"{work.output_tokens / statistics.median(t.wall_s for t in runs):.1f}",
            ", ".join(f"{t.wall_s:.1f}" for t in runs),
            ", ".join(f"{t.cpu_s:.1f}" for t in runs),
            str(positions),
            equal,
        )
    speed.add_row(
        "ratio ours / transformers (target >= 1.5)",
        f"{rounds.speedup('wall_s'):.2f}x",
        "",
        f"{rounds.speedup('cpu_s'):.2f}x",
        f"{their_tokens / ours_tokens:.2f}x fewer",
        "",
    )
    within = memory["peak_bytes"] <= memory["budget_bytes"]
    footprint = Table(
        title="Peak memory of the stage (CPU) against its budget: weights + KV page pools",
        caption=(
            "Peak: anonymous resident memory (Linux VmHWM less file-backed pages) during a second pass "
            "of the workload in a fresh process, over the process's before the stage was loaded; it counts "
            "tensors, step activations, allocator slack and Python objects. KV pools are allocated zeroed, "
            "so pages never used are never resident. File pages paged in while measuring: "
            f"{memory['file_pages_paged_in']} B."
        ),
    )
    for column in ("weights", "KV pools (device)", "KV host buffers", "budget", "measured peak", "within"):
        footprint.add_column(column, justify="right")
    footprint.add_row(
        mib(memory["weight_bytes"]),
        f"{mib(memory['kv_device_bytes'])} ({KV_PAGES} pages of {PAGE_SIZE})",
        mib(memory["kv_host_bytes"]),
        mib(memory["budget_bytes"]),
        mib(memory["peak_bytes"]),
        "yes" if within else "NO",
    )
    return [speed, footprint]


def plot(work: Workload, rounds: Rounds, memory: dict[str, int], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_speed, ax_memory) = plt.subplots(1, 2, figsize=(11, 4.5))
    runners = ["our engine", "transformers\ngenerate"]
    for x, runs in enumerate((rounds.engine, rounds.transformers)):
        speeds = [work.output_tokens / t.wall_s for t in runs]
        ax_speed.bar(x, statistics.median(speeds), 0.6, color=f"C{x}")
        ax_speed.scatter([x] * len(speeds), speeds, color="black", marker="_", s=120, zorder=3)
    ax_speed.set_xticks(range(2), runners)
    ax_speed.set_ylabel("output tokens/s (median round; ticks: every round)")
    ax_speed.set_title(f"Throughput, {THREADS} CPU thread: {rounds.speedup('wall_s'):.2f}x (median ratio)")
    parts = [
        ("weights", memory["weight_bytes"]),
        ("KV pools", memory["kv_device_bytes"]),
        ("KV host", memory["kv_host_bytes"]),
    ]
    bottom = 0.0
    for k, (label, count) in enumerate(parts):
        if not count:
            continue
        ax_memory.bar(0, count / 2**20, 0.6, bottom=bottom, label=label, color=f"C{k + 2}")
        bottom += count / 2**20
    ax_memory.bar(1, memory["peak_bytes"] / 2**20, 0.6, color="C5", label="measured peak")
    ax_memory.set_xticks(range(2), ["budget", "measured peak"])
    ax_memory.set_ylabel("MiB")
    ax_memory.set_title("Stage memory (CPU)")
    ax_memory.legend(loc="lower center")
    fig.tight_layout()
    fig.savefig(path)


def main() -> None:
    work = workload()
    threads = torch.get_num_threads()
    torch.set_num_threads(THREADS)
    try:
        with tempfile.TemporaryDirectory() as directory:
            checkpoint = build_checkpoint(Path(directory))
            memory = measure_memory_in_subprocess(checkpoint)
            rounds = time_both(checkpoint, work)
    finally:
        torch.set_num_threads(threads)  # `make bench` runs other benchmarks in this process afterwards
    console = Console(width=150)
    RESULTS.mkdir(exist_ok=True)
    with (RESULTS / "engine_vs_hf.txt").open("w") as handle:
        for table in tables(work, rounds, memory):
            console.print(table)
            Console(file=handle, width=150).print(table)
    plot(work, rounds, memory, RESULTS / "engine_vs_hf.png")
    console.print(f"wrote {RESULTS / 'engine_vs_hf.txt'} and {RESULTS / 'engine_vs_hf.png'}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--measure-memory"]:
        print(json.dumps(measure_memory(Path(sys.argv[2]))))
    else:
        main()
