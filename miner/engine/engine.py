"""The engine loop: schedule, run the pipeline, sample, retire finished sequences, repeat."""

from __future__ import annotations

from miner.engine.sampler import sample
from miner.engine.scheduler import Scheduler
from miner.engine.sequence import SamplingParams, Sequence
from miner.kv.blocks import BlockManager
from miner.local_pipeline import LocalPipeline
from miner.model.shard import StageShard


class Engine:
    def __init__(
        self,
        shards: list[StageShard],
        num_pages: int = 256,
        page_size: int = 16,
        max_seqs: int = 32,
        token_budget: int = 512,
    ) -> None:
        self.pipeline = LocalPipeline(shards, num_pages, page_size)
        self.scheduler = Scheduler(BlockManager(num_pages, page_size), max_seqs, token_budget)

    def generate(self, prompts: list[list[int]], params: list[SamplingParams]) -> list[list[int]]:
        """Generated token ids for each prompt, in prompt order."""
        sequences = [Sequence(i, list(p), sp) for i, (p, sp) in enumerate(zip(prompts, params, strict=True))]
        for seq in sequences:
            self.scheduler.add(seq)
        while not self.scheduler.idle:
            chunks = self.scheduler.schedule()
            if not chunks:
                raise RuntimeError("the scheduler could not place any sequence in the page pool")
            tables = [self.scheduler.blocks.block_table(c.seq.seq_id) for c in chunks]
            logits = self.pipeline.forward(chunks, tables)
            ready = [(row, c.seq) for row, c in enumerate(chunks) if c.completes_sequence_input]
            tokens = sample(logits[[row for row, _ in ready]], [seq for _, seq in ready])
            for (_, seq), token in zip(ready, tokens, strict=True):
                seq.append(token)
                if seq.finished:
                    self.scheduler.finish(seq)
        return [seq.output for seq in sequences]
