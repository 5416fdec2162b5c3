"""A batch's block tables in the compressed (CSR) form FlashInfer's paged wrappers take. Pure: no tensors."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from miner.attention.layout import BatchLayout


@dataclass(frozen=True)
class PageTable:
    """Sequence i's new tokens are rows qo_indptr[i]:qo_indptr[i+1] of the flattened batch; its keys sit in
    pages kv_indices[kv_indptr[i]:kv_indptr[i+1]], all full but the last, which holds kv_last_page_len[i]
    tokens."""

    qo_indptr: tuple[int, ...]
    kv_indptr: tuple[int, ...]
    kv_indices: tuple[int, ...]
    kv_last_page_len: tuple[int, ...]


def page_table(layout: BatchLayout) -> PageTable:
    """The CSR page table of `layout`, counting each sequence's new tokens as already in the cache (they are
    written before attention runs). Pages a block table reserves beyond the last token are left out."""
    size = layout.page_size
    pages_used = []
    for seq, (kv_len, table) in enumerate(zip(layout.kv_lens, layout.block_tables, strict=True)):
        if kv_len < 1:
            raise ValueError(f"sequence {seq} has no tokens to attend to")
        needed = -(-kv_len // size)
        if needed > len(table):
            raise ValueError(
                f"sequence {seq} has {kv_len} tokens but its block table only {len(table)} pages"
            )
        pages_used.append(table[:needed])
    return PageTable(
        qo_indptr=(0, *itertools.accumulate(layout.query_lens)),
        kv_indptr=(0, *itertools.accumulate(map(len, pages_used))),
        kv_indices=tuple(itertools.chain.from_iterable(pages_used)),
        kv_last_page_len=tuple((kv_len - 1) % size + 1 for kv_len in layout.kv_lens),
    )
