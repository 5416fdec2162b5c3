"""Runs a work unit's lines through this node's pipeline, as its head: prompts rendered and tokenized as
`miner run-local` does, seeds derived from custom_id when the request has none, stop tokens. What comes back
is what the node journals, reports and later signs.

Lines this model cannot serve are left out: the coordinator retries them elsewhere and finally reports them
as errors. A line the coordinator sends with output tokens ("resume": what the head that lost the unit had
generated) continues from them: the output this head returns is all of it, those tokens included.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from client_sdk import openai_batch
from client_sdk.protocol.fields import is_int
from client_sdk.protocol.sampling import SamplingParams
from miner.node.journal import Served
from miner.node.requests import SCRATCH_IDS, Reader, request_id
from miner.pipeline.batch import Prepared
from miner.pipeline.driver import PipelineDriver
from miner.verify.corrupt import CorruptionSwitch

log = logging.getLogger("batchmarket.miner")


@dataclass(frozen=True)
class Started:
    """A unit's servable lines, submitted to the pipeline."""

    ready: list[Prepared]
    ids: list[int]


class HeadExecutor:
    def __init__(self, reader: Reader, corruption: CorruptionSwitch | None = None) -> None:
        self.reader = reader
        self.corruption = corruption  # test-only: a faulty miner for the dispute tests
        self._scratch = itertools.count(SCRATCH_IDS)

    def start(self, task_id: int, lines: list[dict[str, Any]], driver: PipelineDriver) -> Started:
        """Submits the unit's lines that this model can serve, resumed lines from their output so far;
        `finish` collects them."""
        parsed = [openai_batch.parse_line(item["line"], item["index"] + 1) for item in lines]
        partials = {item["index"]: item.get("resume") for item in lines}
        ready = self.reader.prepare(parsed, task_id)
        ids, resume = [], {}
        for r in ready:
            index = r.line.line_number - 1
            ids.append(request_id(task_id, index))
            if output := self._resumable(index, partials[index], r):
                resume[ids[-1]] = output
        driver.submit([(i, r.prompt, r.params) for i, r in zip(ids, ready, strict=True)], resume)
        return Started(ready, ids)

    def _resumable(self, index: int, partial: object, prepared: Prepared) -> tuple[int, ...]:
        """The output tokens a line resumes from: what the coordinator sent when it can be an unfinished
        output of this request (token ids of this model, shorter than max_tokens, no stop token); otherwise
        none, and the line runs from its prompt."""
        if not partial:
            return ()
        vocab = self.reader.config.vocab_size
        if (
            isinstance(partial, list)
            and len(partial) < prepared.params.max_tokens  # checked first: it bounds the scan below
            and all(is_int(t) and 0 <= t < vocab for t in partial)
            and not prepared.params.completed_by(partial)
        ):
            return tuple(partial)
        log.warning("line %d: cannot resume from what the coordinator sent; it runs from its prompt", index)
        return ()

    def finish(
        self, started: Started, driver: PipelineDriver, check: Callable[[], None] = lambda: None
    ) -> list[tuple[int, Served]]:
        """(line index, what we served) for each line `start` submitted, once all have finished. `check`
        raises to abandon the unit (see PipelineDriver.wait_for)."""
        done = driver.wait_for(started.ids, check=check)
        prompts = [r.prompt for r in started.ready]
        outputs = [list(done[i]) for i in started.ids]
        if self.corruption is not None:
            outputs = self.corruption.apply(
                [r.line.custom_id for r in started.ready],
                prompts,
                [r.params for r in started.ready],
                outputs,
                vocab_size=self.reader.config.vocab_size,
                same_model=lambda p, s: self._generate(driver, check, p, s),
            )
        return [
            (r.line.line_number - 1, Served(tuple(prompt), tuple(output)))
            for r, prompt, output in zip(started.ready, prompts, outputs, strict=True)
        ]

    def run(
        self,
        task_id: int,
        lines: list[dict[str, Any]],
        driver: PipelineDriver,
        check: Callable[[], None] = lambda: None,
    ) -> list[tuple[int, Served]]:
        """`start` and `finish` in one call."""
        return self.finish(self.start(task_id, lines, driver), driver, check)

    def _generate(
        self,
        driver: PipelineDriver,
        check: Callable[[], None],
        prompts: Sequence[Sequence[int]],
        params: Sequence[SamplingParams],
    ) -> list[list[int]]:
        ids = [next(self._scratch) for _ in prompts]
        driver.submit(list(zip(ids, prompts, params, strict=True)))
        done = driver.wait_for(ids, check=check)
        return [list(done[i]) for i in ids]
