"""All stages of a pipeline in one process, run one after another.

The exactness reference for the distributed engine (same shards, same cache, no transport), and the model
runner a verifier uses to re-score results.
"""

from __future__ import annotations

import itertools

import torch

from miner.attention.layout import BatchLayout
from miner.kv.blocks import BlockManager
from miner.model.shard import StageShard


class LocalPipeline:
    def __init__(self, shards: list[StageShard], num_pages: int = 256, page_size: int = 16) -> None:
        if not shards or not shards[0].is_first or not shards[-1].is_last:
            raise ValueError("the shards must run from the first layer to the last")
        for before, after in itertools.pairwise(shards):
            if before.end != after.start:
                raise ValueError(f"gap or overlap between layers {before.end} and {after.start}")
        self.shards = shards
        self.blocks = BlockManager(num_pages, page_size)
        self.caches = [shard.new_cache(num_pages, page_size) for shard in shards]

    def step(self, seq_ids: list[int], tokens: list[list[int]], context_lens: list[int]) -> torch.Tensor:
        """Feeds each sequence its new tokens; returns the last-token logits [sequences, vocab]."""
        for seq_id, new, context in zip(seq_ids, tokens, context_lens, strict=True):
            self.blocks.reserve(seq_id, context + len(new))
        layout = BatchLayout(
            context_lens=tuple(context_lens),
            query_lens=tuple(len(t) for t in tokens),
            block_tables=tuple(tuple(self.blocks.block_table(s)) for s in seq_ids),
            page_size=self.blocks.page_size,
        )
        device = self.shards[0].device
        hidden = torch.tensor([t for seq in tokens for t in seq], dtype=torch.long, device=device)
        for shard, cache in zip(self.shards, self.caches, strict=True):
            hidden = shard.forward(hidden, layout, cache)
        return hidden

    @torch.inference_mode()
    def generate_greedy(
        self, prompts: list[list[int]], max_new_tokens: int, eos_token_id: int | None = None
    ) -> list[list[int]]:
        """Greedy continuation of every prompt, batched; a sequence stops at EOS or `max_new_tokens`."""
        outputs: list[list[int]] = [[] for _ in prompts]
        active = list(range(len(prompts)))
        pending = [list(p) for p in prompts]  # tokens not yet in the cache
        context = [0] * len(prompts)
        while active:
            logits = self.step(active, [pending[i] for i in active], [context[i] for i in active])
            still = []
            for row, i in enumerate(active):
                context[i] += len(pending[i])
                token = int(logits[row].argmax())
                outputs[i].append(token)
                pending[i] = [token]
                if len(outputs[i]) < max_new_tokens and token != eos_token_id:
                    still.append(i)
                else:
                    self.blocks.release(i)
            active = still
        return outputs
