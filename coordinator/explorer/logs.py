"""Reading one kind of chain event forward from a block, each block once (but the last span again while an
event expected once has not shown up): the explorer's disputes page lists the verifiers, and a dispute's page
its resolution, from event logs. A provider's
eth_getLogs refuses wide ranges and a chain only grows, so each read asks for LOG_SPAN blocks at a time, at
most MAX_SPANS of them, and the next read goes on where the last one stopped."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")

LOG_SPAN = 5_000  # blocks per eth_getLogs call (common provider limits are 5,000 to 10,000)
MAX_SPANS = 8  # calls one read makes; a long chain is caught up over several reads


class Forward(Generic[T]):
    """The newest `keep` events `fetch(from_block, to_block)` finds from block `start` on. With `once`,
    reading stops at the first event (a dispute is resolved once), and a read that reaches the chain's head
    without it leaves the last span to be read again (a node whose logs lag its state, or one of several
    behind a load balancer, may not show an event the state already reflects)."""

    def __init__(
        self, start: int, fetch: Callable[[int, int], list[T]], keep: int, once: bool = False
    ) -> None:
        self.start, self.next_block, self.fetch, self.once = start, start, fetch, once
        self.kept: deque[T] = deque(maxlen=keep)
        self._lock = threading.Lock()

    def read(self, latest: int) -> list[T]:
        """Reads on up to block `latest` (at most MAX_SPANS calls), then the kept events, oldest first."""
        with self._lock:
            for _ in range(MAX_SPANS):
                if self.next_block > latest or (self.once and self.kept):
                    break
                end = min(latest, self.next_block + LOG_SPAN - 1)
                self.kept.extend(self.fetch(self.next_block, end))
                self.next_block = end + 1  # only once the span was read: a failed call is asked again
            if self.once and not self.kept and self.next_block > latest:
                self.next_block = max(self.start, latest - LOG_SPAN + 1)
            return list(self.kept)


class Newest(Generic[T]):
    """The newest `keep` events `fetch(from_block, to_block)` finds from block `start` on, however long the
    chain: the first reads go backward from the head they first saw, a span at a time, until `keep` are found
    (or `start` is reached), so the newest come first; every read then goes forward from that head."""

    def __init__(self, start: int, fetch: Callable[[int, int], list[T]], keep: int) -> None:
        self.start, self.fetch, self.keep = start, fetch, keep
        self.older: list[T] = []  # found going backward, oldest first
        self.top: int | None = None  # the next block going backward (None: before the first read)
        self.newer: Forward[T] | None = None
        self._lock = threading.Lock()

    def read(self, latest: int) -> list[T]:
        """Reads on (at most MAX_SPANS calls going backward, then at most MAX_SPANS forward), then the newest
        `keep` events found, oldest first."""
        with self._lock:
            if self.newer is None or self.top is None:
                self.top, self.newer = latest, Forward(latest + 1, self.fetch, self.keep)
            for _ in range(MAX_SPANS):
                if len(self.older) >= self.keep or self.top < self.start:
                    break
                low = max(self.start, self.top - LOG_SPAN + 1)
                self.older = self.fetch(low, self.top) + self.older
                self.top = low - 1  # only once the span was read: a failed call is asked again
            return (self.older + self.newer.read(latest))[-self.keep :]
