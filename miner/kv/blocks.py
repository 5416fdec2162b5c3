"""Page allocation for the KV cache: pure bookkeeping, no tensors.

Each sequence owns a block table (the pages holding its tokens, in order); pages return to the pool when the
sequence finishes.
"""

from __future__ import annotations

from collections.abc import Hashable


class OutOfPages(RuntimeError):
    """The pool cannot hold the requested tokens; the caller should wait for sequences to finish."""


class BlockManager:
    def __init__(self, num_pages: int, page_size: int) -> None:
        if num_pages <= 0 or page_size <= 0:
            raise ValueError("num_pages and page_size must be positive")
        self.page_size = page_size
        self.num_pages = num_pages
        self._free = list(range(num_pages - 1, -1, -1))  # pop() hands out low page numbers first
        self._tables: dict[Hashable, list[int]] = {}

    @property
    def free_pages(self) -> int:
        return len(self._free)

    def held(self, seq_id: Hashable) -> int:
        """Pages `seq_id` holds now (0 for one it never reserved)."""
        return len(self._tables.get(seq_id, ()))

    def pages_for(self, num_tokens: int) -> int:
        """Pages that hold `num_tokens` tokens."""
        return -(-num_tokens // self.page_size)

    def pages_needed(self, seq_id: Hashable, num_tokens: int) -> int:
        """Extra pages `seq_id` needs to hold `num_tokens` tokens in total."""
        return max(0, self.pages_for(num_tokens) - self.held(seq_id))

    def can_hold(self, seq_id: Hashable, num_tokens: int) -> bool:
        return self.pages_needed(seq_id, num_tokens) <= len(self._free)

    def reserve(self, seq_id: Hashable, num_tokens: int) -> list[int]:
        """Grows `seq_id`'s block table to hold `num_tokens` tokens; returns the table."""
        needed = self.pages_needed(seq_id, num_tokens)
        if needed > len(self._free):
            raise OutOfPages(f"{needed} pages needed, {len(self._free)} free")
        table = self._tables.setdefault(seq_id, [])
        table.extend(self._free.pop() for _ in range(needed))
        return table

    def block_table(self, seq_id: Hashable) -> list[int]:
        return self._tables[seq_id]

    def release(self, seq_id: Hashable) -> None:
        """Returns the sequence's pages to the pool."""
        self._free.extend(reversed(self._tables.pop(seq_id, [])))
