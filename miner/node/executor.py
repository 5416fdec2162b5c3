"""Runs a work unit's lines through this node's pipeline, as its head: prompts rendered and tokenized as
`miner run-local` does, seeds derived from custom_id when the request has none, stop tokens. What comes back
is what the node journals, reports and later signs.

Lines this model cannot serve are left out: the coordinator retries them elsewhere and finally reports them
as errors.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

from client_sdk import openai_batch
from miner.engine.sequence import SamplingParams
from miner.node.journal import Served
from miner.node.requests import SCRATCH_IDS, Reader, request_id
from miner.pipeline.driver import PipelineDriver
from miner.verify.corrupt import CorruptionSwitch


class HeadExecutor:
    def __init__(self, reader: Reader, corruption: CorruptionSwitch | None = None) -> None:
        self.reader = reader
        self.corruption = corruption  # test-only: a faulty miner for the dispute tests
        self._scratch = itertools.count(SCRATCH_IDS)

    def run(
        self,
        task_id: int,
        lines: list[dict[str, Any]],
        driver: PipelineDriver,
        check: Callable[[], None] = lambda: None,
    ) -> list[tuple[int, Served]]:
        """(line index, what we served) for the unit's lines that this model can serve. `check` raises to
        abandon the unit (see PipelineDriver.completions)."""
        parsed = [openai_batch.parse_line(item["line"], item["index"] + 1) for item in lines]
        ready = self.reader.prepare(parsed)
        if not ready:
            return []
        indices = [r.line.line_number - 1 for r in ready]
        prompts = [r.prompt for r in ready]
        params = [r.params for r in ready]
        ids = [request_id(task_id, index) for index in indices]
        outputs = self._generate(driver, check, ids, prompts, params)
        if self.corruption is not None:
            outputs = self.corruption.apply(
                [r.line.custom_id for r in ready],
                prompts,
                params,
                outputs,
                vocab_size=self.reader.config.vocab_size,
                same_model=lambda p, s: self._generate(driver, check, self._scratch_ids(len(p)), p, s),
            )
        return [
            (index, Served(tuple(prompt), tuple(output)))
            for index, prompt, output in zip(indices, prompts, outputs, strict=True)
        ]

    def _scratch_ids(self, count: int) -> list[int]:
        return [next(self._scratch) for _ in range(count)]

    @staticmethod
    def _generate(
        driver: PipelineDriver,
        check: Callable[[], None],
        ids: Sequence[int],
        prompts: Sequence[Sequence[int]],
        params: Sequence[SamplingParams],
    ) -> list[list[int]]:
        driver.submit(list(zip(ids, prompts, params, strict=True)))
        done = {c.request_id: c.output for c in driver.completions(check=check)}
        return [list(done[i]) for i in ids]
