"""Runs a work unit's requests on this node: the whole model in one process (a pipeline of one stage), with
the same preparation as `miner run-local` (prompt rendering, seeds derived from custom_id when the request
has none, stop tokens). Keeps a record of what it produced, to check before signing."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from client_sdk import openai_batch
from miner.engine.engine import Engine
from miner.model.config import ModelConfig
from miner.model.shard import StageShard
from miner.pipeline.batch import load_tokenizer, prepare, stop_token_ids

MAX_SEQS = 16


@dataclass(frozen=True)
class Produced:
    """One request as this node served it."""

    line: openai_batch.BatchLine
    prompt: tuple[int, ...]
    output: tuple[int, ...]
    text: str
    finish_reason: str


class WholeModelExecutor:
    def __init__(self, model_dir: Path, dtype: torch.dtype = torch.float32, device: str = "cpu") -> None:
        self.model_dir = model_dir
        self.config = ModelConfig.load(model_dir)
        self.tokenizer = load_tokenizer(model_dir)
        self.stops = stop_token_ids(self.tokenizer, model_dir)
        self.shard = StageShard.load(model_dir, 0, self.config.num_layers, dtype, device)
        self.produced: dict[tuple[int, int], Produced] = {}  # (task id, line index) -> what we sent

    def run(self, task_id: int, lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Results for the unit's lines, in the coordinator's result format. Lines this model cannot serve
        are left out (the coordinator retries them elsewhere and finally reports them as errors)."""
        parsed = [openai_batch.parse_line(item["line"], item["index"] + 1) for item in lines]
        ready, _errors = prepare(parsed, self.tokenizer, self.config, self.stops)
        if not ready:
            return []
        longest = max(len(r.prompt) + r.params.max_tokens for r in ready)
        pages = MAX_SEQS * -(-longest // 16)
        engine = Engine([self.shard], page_size=16, local_pages=pages, max_seqs=MAX_SEQS)
        outputs = engine.generate([r.prompt for r in ready], [r.params for r in ready])
        results = []
        for request, output in zip(ready, outputs, strict=True):
            index = request.line.line_number - 1
            stopped = bool(output) and output[-1] in request.params.stop_token_ids
            produced = Produced(
                request.line,
                tuple(request.prompt),
                tuple(output),
                self.tokenizer.decode(output, skip_special_tokens=True),
                "stop" if stopped else "length",
            )
            self.produced[(task_id, index)] = produced
            results.append(
                {
                    "index": index,
                    "text": produced.text,
                    "output_token_ids": list(produced.output),
                    "prompt_tokens": len(produced.prompt),
                    "finish_reason": produced.finish_reason,
                }
            )
        return results
