"""Where a flattened batch's tokens sit: per sequence, how many tokens are cached and how many are new."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

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

    @property
    def kv_lens(self) -> tuple[int, ...]:
        """Tokens each sequence has in the cache once this batch's keys are written."""
        return tuple(c + q for c, q in zip(self.context_lens, self.query_lens, strict=True))

    @cached_property
    def token_sequences(self) -> torch.Tensor:
        """Index of the sequence each new token belongs to [tokens] (on the CPU; computed once per layout)."""
        return torch.repeat_interleave(torch.arange(len(self.query_lens)), torch.tensor(self.query_lens))

    @cached_property
    def token_positions(self) -> torch.Tensor:
        """Position of each new token in its sequence [tokens] (on the CPU; computed once per layout)."""
        seq = self.token_sequences
        query = torch.tensor(self.query_lens)
        first_token = query.cumsum(0) - query
        return torch.tensor(self.context_lens)[seq] + torch.arange(len(seq)) - first_token[seq]

    def positions(self, device: torch.device) -> torch.Tensor:
        return self.token_positions.to(device)

    def padded_block_tables(self) -> torch.Tensor:
        """Block tables as one [sequences, longest table] tensor (on the CPU); short rows end in page 0s."""
        width = max(map(len, self.block_tables), default=0)
        return torch.tensor([list(t) + [0] * (width - len(t)) for t in self.block_tables], dtype=torch.long)

    def slots(self, device: torch.device) -> torch.Tensor:
        """Flat cache slot (page * page_size + offset) of every new token."""
        positions = self.token_positions
        pages = self.padded_block_tables()[self.token_sequences, positions // self.page_size]
        return (pages * self.page_size + positions % self.page_size).to(device)

    def last_token_indices(self, device: torch.device) -> torch.Tensor:
        """Index of each sequence's last new token in the flattened batch."""
        return torch.tensor(self.query_lens, device=device).cumsum(0) - 1
