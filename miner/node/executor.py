"""Runs a work unit's requests on this node: the whole model in one process (a pipeline of one stage), with
the same preparation as `miner run-local` (prompt rendering, seeds derived from custom_id when the request
has none, stop tokens)."""

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
from miner.verify import corrupt

MAX_SEQS = 16
PAGE_SIZE = 16


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
        self.corruption = corrupt.from_environment()  # test-only: a faulty miner for the dispute tests

    def run(self, lines: list[dict[str, Any]]) -> list[tuple[int, Produced]]:
        """(line index, what we produced) for the unit's lines. Lines this model cannot serve are left out
        (the coordinator retries them elsewhere and finally reports them as errors)."""
        parsed = [openai_batch.parse_line(item["line"], item["index"] + 1) for item in lines]
        ready, _errors = prepare(parsed, self.tokenizer, self.config, self.stops)
        if not ready:
            return []
        longest = max(len(r.prompt) + r.params.max_tokens for r in ready)
        pages = MAX_SEQS * -(-longest // PAGE_SIZE)
        engine = Engine([self.shard], page_size=PAGE_SIZE, local_pages=pages, max_seqs=MAX_SEQS)
        outputs = engine.generate([r.prompt for r in ready], [r.params for r in ready])
        if self.corruption is not None:
            outputs = self.corruption.apply(
                [r.line.custom_id for r in ready],
                [r.prompt for r in ready],
                [r.params for r in ready],
                outputs,
                vocab_size=self.config.vocab_size,
                same_model=engine.generate,
            )
        produced = []
        for request, output in zip(ready, outputs, strict=True):
            stopped = bool(output) and output[-1] in request.params.stop_token_ids
            text = self.tokenizer.decode(output, skip_special_tokens=True)
            finish = "stop" if stopped else "length"
            produced.append(
                (
                    request.line.line_number - 1,
                    Produced(request.line, tuple(request.prompt), tuple(output), text, finish),
                )
            )
        return produced
