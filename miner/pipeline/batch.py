"""`miner run-local`'s job: an OpenAI Batch file through a local multi-process pipeline, into output and
error files.

Every line is validated on its own: a line that is not a valid request (malformed JSON, an unknown endpoint,
a missing field, a repeated custom_id) or that cannot run on this model (a prompt with its max_tokens over
the context, a token id outside the vocabulary) becomes a line of the error file, with the reason and its
line number, and the others go on. Requests without a seed get one derived from their custom_id
(client_sdk/protocol/sampling.py, with the task id that no on-chain task has), so a run is reproducible; every
result carries the seed it was sampled with.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from client_sdk import openai_batch
from client_sdk.errors import UserError
from client_sdk.openai_batch import BatchLine
from client_sdk.protocol.constants import MAX_BATCH_LINES
from client_sdk.protocol.pipeline import microbatches
from client_sdk.protocol.sampling import LOCAL_TASK_ID, SamplingParams, line_seed
from miner.kv.cache import PAGE_SIZE
from miner.model.config import ModelConfig
from miner.model.dtypes import dtype_named
from miner.pipeline.plan import decode_step_ms
from miner.pipeline.processes import StageProcesses, even_split
from miner.pipeline.stage import CacheSettings


@dataclass(frozen=True)
class RunSettings:
    stages: int = 2
    microbatches: int | None = None  # None: DeServe's rule from a measured stage time and the latency
    offload: bool = True
    latency_ms: float = 0.0
    dtype: str = "float32"
    device: str = "cpu"
    # sequences per microbatch; on SmolLM2, 2 CPU cores, one stage, 64 in flight ran 15% faster than 32
    max_batch_size: int = 64
    threads: int | None = None  # torch threads per stage; None: the machine's cores split between the stages


@dataclass(frozen=True)
class Prepared:
    line: BatchLine
    prompt: list[int]
    params: SamplingParams


@dataclass(frozen=True)
class Summary:
    completed: int
    errors: int
    output_tokens: int
    seconds: float
    microbatches: int


TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json")


def load_tokenizer(model_dir: Path) -> Any:
    from transformers import AutoTokenizer

    # transformers would otherwise make up an empty tokenizer for the model type
    if not any((model_dir / name).is_file() for name in TOKENIZER_FILES):
        raise UserError(f"no tokenizer in {model_dir} (none of {', '.join(TOKENIZER_FILES)})")
    try:
        return AutoTokenizer.from_pretrained(model_dir)
    except (OSError, ValueError) as exc:
        raise UserError(f"no usable tokenizer in {model_dir} ({str(exc).splitlines()[0]})") from None


def stop_token_ids(tokenizer: Any, model_dir: Path) -> tuple[int, ...]:
    """The tokenizer's end-of-sequence id and the checkpoint's eos_token_id(s)."""
    ids = {tokenizer.eos_token_id} if tokenizer.eos_token_id is not None else set()
    declared = json.loads((model_dir / "config.json").read_text()).get("eos_token_id")
    ids.update(declared if isinstance(declared, list) else [declared] if isinstance(declared, int) else [])
    return tuple(sorted(ids))


def prepare(
    lines: list[BatchLine], tokenizer: Any, config: ModelConfig, stops: tuple[int, ...], task_id: int
) -> tuple[list[Prepared], list[dict[str, Any]]]:
    """Requests ready to run, and error lines for those this model cannot serve; a request without a seed is
    sampled with one derived from `task_id` and its custom_id (client_sdk/protocol/sampling.py)."""
    ready, errors = [], []
    for line in lines:
        if line.url == openai_batch.CHAT and not getattr(tokenizer, "chat_template", None):
            raise UserError(
                f"line {line.line_number}: a chat request, but the tokenizer has no chat template"
            )
        prompt = openai_batch.prompt_token_ids(tokenizer, line)
        body = line.raw["body"]
        explicit = any(body.get(k) is not None for k in ("max_tokens", "max_completion_tokens"))
        # an explicit max_tokens must fit; the default only bounds the output, like OpenAI's
        room = config.max_position_embeddings - len(prompt)
        max_tokens = line.max_tokens if explicit else min(line.max_tokens, room)
        problem = None
        if any(t >= config.vocab_size for t in prompt):
            problem = (
                "invalid_prompt",
                f"the prompt has token ids outside the vocabulary of {config.vocab_size}",
            )
        elif max_tokens < 1 or len(prompt) + max_tokens > config.max_position_embeddings:
            problem = (
                "context_length_exceeded",
                f"the prompt has {len(prompt)} tokens and max_tokens is {line.max_tokens}, over the model's "
                f"context of {config.max_position_embeddings}",
            )
        if problem:
            errors.append(openai_batch.error_line(line_id(line.custom_id), line.custom_id, *problem))
            continue
        seed = line_seed(task_id, line.custom_id, line.seed)
        params = SamplingParams(max_tokens, line.temperature, line.top_p, seed, stops)
        ready.append(Prepared(line, prompt, params))
    return ready, errors


def line_id(custom_id: str) -> str:
    return "batch_req_" + hashlib.sha256(custom_id.encode()).hexdigest()[:24]


def cache_settings(requests: list[Prepared], settings: RunSettings, microbatches: int) -> CacheSettings:
    """Pages for `max_batch_size` of the longest request per microbatch; with offloading, half of them live in
    host memory between the microbatch's turns."""
    longest = max(len(r.prompt) + r.params.max_tokens for r in requests)
    pages = settings.max_batch_size * -(-longest // PAGE_SIZE)
    offloaded = pages // 2 if settings.offload else 0
    return CacheSettings(
        page_size=PAGE_SIZE,
        local_pages=pages - offloaded,
        global_pages=offloaded,
        num_microbatches=microbatches,
        max_seqs=settings.max_batch_size,
    )


def plan_microbatches(
    model_dir: Path, config: ModelConfig, requests: list[Prepared], settings: RunSettings
) -> int:
    if settings.microbatches is not None:
        count = settings.microbatches
    else:
        start, end = even_split(config.num_layers, settings.stages)[-1]  # holds the LM head: the slowest
        context = max(len(r.prompt) for r in requests)
        batch = min(settings.max_batch_size, len(requests))
        dtype = dtype_named(settings.dtype)
        stage_ms = decode_step_ms(model_dir, start, end, batch, context, dtype, settings.device)
        count = min(
            microbatches([stage_ms] * settings.stages, [settings.latency_ms] * settings.stages), len(requests)
        )
    if settings.offload and count < 2:
        count = 2  # offloading alternates two pools between microbatches
    return count


def run_batch(
    model_dir: Path,
    input_path: Path,
    output_path: Path,
    errors_path: Path,
    settings: RunSettings,
    on_progress: Callable[[int, int], None] = lambda done, total: None,
) -> Summary:
    try:
        data = input_path.read_bytes()
    except OSError as exc:
        raise UserError(f"cannot read {input_path}: {exc.strerror}") from None
    lines, problems = openai_batch.read_batch(data, max_lines=MAX_BATCH_LINES)
    config = ModelConfig.load(model_dir)
    dtype_named(settings.dtype)  # an unknown dtype fails before any work
    tokenizer = load_tokenizer(model_dir)
    stops = stop_token_ids(tokenizer, model_dir)
    requests, errors = prepare(lines, tokenizer, config, stops, LOCAL_TASK_ID)
    errors += [  # lines that are not valid requests: reported, and the others still run
        openai_batch.error_line(
            line_id(p.custom_id or f"line {p.line_number}"), p.custom_id, "invalid_request", p.message
        )
        for p in problems
    ]
    seconds = 0.0  # generation only: from the pipeline's start to its last completion
    output_tokens = 0
    microbatches = 0
    with output_path.open("w") as out:
        if requests:
            microbatches = plan_microbatches(model_dir, config, requests, settings)
            pipeline = StageProcesses(
                model_dir,
                even_split(config.num_layers, settings.stages),
                cache_settings(requests, settings, microbatches),
                settings.latency_ms,
                settings.dtype,
                settings.device,
                threads=settings.threads,
            )
            created = int(time.time())
            with pipeline:
                started = time.monotonic()
                pipeline.submit([(i, r.prompt, r.params) for i, r in enumerate(requests)])
                on_progress(0, len(requests))
                for done, completion in enumerate(pipeline.completions(), start=1):
                    request = requests[completion.request_id]
                    output_tokens += len(completion.output)
                    out.write(
                        json.dumps(result_line(request, list(completion.output), tokenizer, created)) + "\n"
                    )
                    on_progress(done, len(requests))
                seconds = time.monotonic() - started
    with errors_path.open("w") as handle:
        handle.writelines(json.dumps(line) + "\n" for line in errors)
    return Summary(len(requests), len(errors), output_tokens, seconds, microbatches)


def result_line(request: Prepared, output: list[int], tokenizer: Any, created: int) -> dict[str, Any]:
    line = request.line
    stopped = bool(output) and output[-1] in request.params.stop_token_ids
    digest = hashlib.sha256(line.custom_id.encode()).hexdigest()[:24]
    body = openai_batch.response_body(
        line,
        request_id=("chatcmpl-" if line.url == openai_batch.CHAT else "cmpl-") + digest,
        created=created,
        text=tokenizer.decode(output, skip_special_tokens=True),
        prompt_tokens=len(request.prompt),
        completion_tokens=len(output),
        finish_reason="stop" if stopped else "length",
        token_ids=output,
        seed=request.params.seed,
    )
    return openai_batch.output_line(line_id(line.custom_id), line.custom_id, "req_" + digest, body)
