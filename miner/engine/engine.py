"""The engine loop: pick the next microbatch, schedule it, run the pipeline, sample, retire, repeat.

Sequences are spread over `num_microbatches` microbatches, each with its own scheduler and page space; with
`global_pages` > 0 part of each microbatch's KV space is offloaded to host memory between its turns (DeServe).
"""

from __future__ import annotations

from client_sdk.protocol.sampling import SamplingParams
from miner.engine.in_process import InProcessPipeline
from miner.engine.sampler import sample
from miner.engine.scheduler import Scheduler
from miner.engine.sequence import Sequence
from miner.kv.blocks import BlockManager
from miner.kv.cache import PAGE_SIZE
from miner.model.shard import StageShard


class Engine:
    def __init__(
        self,
        shards: list[StageShard],
        page_size: int = PAGE_SIZE,
        local_pages: int = 256,
        global_pages: int = 0,
        num_microbatches: int = 1,
        max_seqs: int = 32,
        token_budget: int = 512,
    ) -> None:
        self.pipeline = InProcessPipeline(shards, page_size, num_microbatches, local_pages, global_pages)
        pages = self.pipeline.pages_per_microbatch
        self.schedulers = [
            Scheduler(BlockManager(pages, page_size), max_seqs, token_budget) for _ in range(num_microbatches)
        ]
        self.steps = 0  # forward passes run so far (each microbatch's turn is one)

    @property
    def preemptions(self) -> int:
        return sum(s.preemptions for s in self.schedulers)

    def generate(self, prompts: list[list[int]], params: list[SamplingParams]) -> list[list[int]]:
        """Generated token ids for each prompt, in prompt order."""
        sequences = [Sequence(i, list(p), sp) for i, (p, sp) in enumerate(zip(prompts, params, strict=True))]
        for seq in sequences:
            self.schedulers[seq.seq_id % len(self.schedulers)].add(seq)
        count = len(self.schedulers)
        turn = 0
        while busy := [i for i, s in enumerate(self.schedulers) if not s.idle]:
            # round robin over microbatches with work; the next one's pages are prefetched during this step
            microbatch = min(busy, key=lambda i: (i - turn) % count)
            others = [i for i in busy if i != microbatch]
            following = min(others, key=lambda i: (i - microbatch) % count, default=microbatch)
            self._step(microbatch, following)
            turn = microbatch + 1
        return [seq.output for seq in sequences]

    def _step(self, microbatch: int, next_microbatch: int) -> None:
        scheduler = self.schedulers[microbatch]
        chunks = scheduler.schedule()
        if not chunks:
            raise RuntimeError("the scheduler could not place any sequence in the page pool")
        tables = [scheduler.blocks.block_table(c.seq.seq_id) for c in chunks]
        logits = self.pipeline.forward(microbatch, next_microbatch, chunks, tables)
        self.steps += 1
        ready = [(row, c.seq) for row, c in enumerate(chunks) if c.completes_sequence_input]
        rows = logits if len(ready) == len(chunks) else logits[[row for row, _ in ready]]
        # each sampled token's position: the tokens before it, all cached by now
        tokens = sample(rows, [seq.params for _, seq in ready], [len(seq.tokens) for _, seq in ready])
        for (_, seq), token in zip(ready, tokens, strict=True):
            seq.append(token)
            if seq.finished:
                scheduler.finish(seq)
