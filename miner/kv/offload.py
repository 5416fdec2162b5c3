"""DeServe's KV offloading: more microbatches in flight without shrinking each one's KV space.

Each microbatch owns a local page pool that always stays on the device, plus a host buffer. Two global
pools alternate between steps: while one serves the running microbatch, the other is written back to the
previous microbatch's host buffer and loaded with the next one's. So every microbatch sees local + global
pages, but the device holds only N local pools and two global ones.

Pages live in one device tensor per layer, laid out as [microbatch 0 local | ... | microbatch N-1 local |
global 0 | global 1]. A microbatch addresses pages logically (local first, then global) and `physical()` maps
them for the pool it runs on this step. With no global pages this is plain per-microbatch paging, no
offloading. On CPU the copies run synchronously; on CUDA they would overlap on a side stream (same logic).
"""

from __future__ import annotations

import torch

from miner.kv.cache import KVShape, PagedKVCache


class MicrobatchKVCache:
    def __init__(
        self, kv: KVShape, num_microbatches: int, local_pages: int, global_pages: int, page_size: int
    ) -> None:
        if num_microbatches < 1 or local_pages < 0 or global_pages < 0 or local_pages + global_pages < 1:
            raise ValueError("need at least one microbatch and one page per microbatch")
        if global_pages and num_microbatches < 2:
            raise ValueError("offloading (global pages) needs at least 2 microbatches")
        self.num_microbatches = num_microbatches
        self.local_pages = local_pages
        self.global_pages = global_pages
        total = num_microbatches * local_pages + 2 * global_pages
        self.device_cache = PagedKVCache(kv, total, page_size)
        pinned = kv.device.type == "cuda"
        host_shape = (2, kv.num_layers, global_pages, page_size, kv.num_kv_heads, kv.head_dim)
        self.host = [
            torch.zeros(host_shape, dtype=kv.dtype, pin_memory=pinned) for _ in range(num_microbatches)
        ]
        self.resident: list[int | None] = [None, None]  # microbatch whose global pages each pool holds
        self.bytes_swapped = 0
        self._step = 0
        self._pool_of_current = 0

    @property
    def pages_per_microbatch(self) -> int:
        return self.local_pages + self.global_pages

    def begin_step(self, microbatch: int, next_microbatch: int) -> None:
        """Makes `microbatch`'s global pages resident in this step's pool, and prepares the other pool for
        `next_microbatch` (write back its occupant, load the next one's pages)."""
        if not self.global_pages:
            return
        pool = self._step % 2
        self._step += 1
        self._swap(pool, microbatch)
        self._pool_of_current = pool
        if next_microbatch != microbatch:
            self._swap(1 - pool, next_microbatch)

    def physical(self, microbatch: int, logical_pages: list[int]) -> list[int]:
        """Device page ids of a block table of `microbatch` during the current step."""
        global_base = self.num_microbatches * self.local_pages + self._pool_of_current * self.global_pages
        local_base = microbatch * self.local_pages
        return [
            local_base + page if page < self.local_pages else global_base + page - self.local_pages
            for page in logical_pages
        ]

    def _swap(self, pool: int, microbatch: int) -> None:
        if self.resident[pool] == microbatch:
            return
        region = self._pool_region(pool)
        occupant = self.resident[pool]
        if occupant is not None:
            self.host[occupant][0].copy_(self.device_cache.keys[:, region])
            self.host[occupant][1].copy_(self.device_cache.values[:, region])
            self.bytes_swapped += self.host[occupant].numel() * self.host[occupant].element_size()
        if self.resident[1 - pool] == microbatch:
            # Its latest pages sit in the other pool (it ran last step): write them back before loading.
            other = self._pool_region(1 - pool)
            self.host[microbatch][0].copy_(self.device_cache.keys[:, other])
            self.host[microbatch][1].copy_(self.device_cache.values[:, other])
            self.resident[1 - pool] = None
        self.device_cache.keys[:, region].copy_(self.host[microbatch][0])
        self.device_cache.values[:, region].copy_(self.host[microbatch][1])
        self.bytes_swapped += self.host[microbatch].numel() * self.host[microbatch].element_size()
        self.resident[pool] = microbatch

    def _pool_region(self, pool: int) -> slice:
        start = self.num_microbatches * self.local_pages + pool * self.global_pages
        return slice(start, start + self.global_pages)
