"""Where a flattened batch's tokens sit: per sequence, how many tokens are cached and how many are new."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class BatchLayout:
    """Tokens of several sequences, concatenated.

    Sequence i contributes `query_lens[i]` new tokens at positions `context_lens[i]`,
    `context_lens[i] + 1`, ...; its cached and new keys live in the pages of `block_tables[i]`.
    """

    context_lens: tuple[int, ...]
    query_lens: tuple[int, ...]
    block_tables: tuple[tuple[int, ...], ...]
    page_size: int

    @property
    def num_tokens(self) -> int:
        return sum(self.query_lens)

    def positions(self, device: torch.device) -> torch.Tensor:
        ranges = [torch.arange(c, c + q) for c, q in zip(self.context_lens, self.query_lens, strict=True)]
        return torch.cat(ranges).to(device)

    def slots(self, device: torch.device) -> torch.Tensor:
        """Flat cache slot (page * page_size + offset) of every new token."""
        slots = []
        for context, query, table in zip(self.context_lens, self.query_lens, self.block_tables, strict=True):
            for position in range(context, context + query):
                slots.append(table[position // self.page_size] * self.page_size + position % self.page_size)
        return torch.tensor(slots, dtype=torch.long, device=device)

    def last_token_indices(self, device: torch.device) -> torch.Tensor:
        """Index of each sequence's last new token in the flattened batch."""
        return torch.tensor(self.query_lens, device=device).cumsum(0) - 1
