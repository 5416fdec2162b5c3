"""How a node names the requests it puts through a pipeline, and reads what it served back as a result line.

Request ids carry the task and the line (task id << 32 | line index), so every stage of the pipeline knows
which line of which task each record belongs to, and can journal and later sign it without asking anyone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from client_sdk import openai_batch
from client_sdk.openai_batch import BatchLine
from client_sdk.protocol.sampling import line_seed
from client_sdk.results import output_line_id
from miner.model.config import ModelConfig
from miner.pipeline.batch import Prepared, prepare

LINE_BITS = 32
MAX_TASK_ID = 2**31 - 1  # request ids stay below 2**63
SCRATCH_IDS = 2**63  # from here on: requests that answer no line (a faulty miner's reruns, in tests)


def request_id(task_id: int, index: int) -> int:
    if not 0 <= task_id <= MAX_TASK_ID or not 0 <= index < 2**LINE_BITS:
        raise ValueError(f"task {task_id} line {index} does not fit in a request id")
    return task_id << LINE_BITS | index


def task_and_line(request: int) -> tuple[int, int]:
    return request >> LINE_BITS, request & (2**LINE_BITS - 1)


@dataclass(frozen=True)
class Reader:
    """The model-side facts a result line is made from: the tokenizer, the config and the stop tokens."""

    tokenizer: Any
    config: ModelConfig
    stops: tuple[int, ...]

    def prepare(self, lines: list[BatchLine], task_id: int) -> list[Prepared]:
        """The requests of task `task_id` this model can serve, tokenized as every node tokenizes them."""
        ready, _errors = prepare(lines, self.tokenizer, self.config, self.stops, task_id)
        return ready

    def text(self, output: tuple[int, ...]) -> str:
        return str(self.tokenizer.decode(list(output), skip_special_tokens=True))

    def finish_reason(self, output: tuple[int, ...]) -> str:
        return "stop" if output and output[-1] in self.stops else "length"

    def result_line(
        self, task_id: int, index: int, line: BatchLine, created: int, prompt: int, output: tuple[int, ...]
    ) -> dict[str, Any]:
        """The output line a result with this output makes (what the coordinator builds from our results)."""
        line_id = output_line_id(task_id, index)
        body = openai_batch.response_body(
            line,
            request_id=line_id,
            created=created,
            text=self.text(output),
            prompt_tokens=prompt,
            completion_tokens=len(output),
            finish_reason=self.finish_reason(output),
            token_ids=output,
            seed=line_seed(task_id, line.custom_id, line.seed),
        )
        return openai_batch.output_line(line_id, line.custom_id, line_id, body)
