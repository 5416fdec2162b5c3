"""A small per-process cache of values that go stale: each kept for `ttl_s` seconds, at most `size` of them
(the least recently used leave first). The explorer keeps each page's reads in one, so that however often a
page is asked for, its database and chain reads run at most once per `ttl_s`."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Fresh(Generic[K, V]):
    """Thread-safe; two threads missing the same key at once both make it (the value is the same)."""

    def __init__(self, size: int, ttl_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.size, self.ttl_s, self.clock = size, ttl_s, clock
        self._values: OrderedDict[K, tuple[float, V]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K, make: Callable[[], V]) -> V:
        """The value of `key` if it was made less than `ttl_s` ago, else `make()` (kept)."""
        now = self.clock()
        with self._lock:
            kept = self._values.get(key)
            if kept is not None and now - kept[0] < self.ttl_s:
                self._values.move_to_end(key)
                return kept[1]
        value = make()
        with self._lock:
            self._values[key] = (now, value)
            self._values.move_to_end(key)
            while len(self._values) > self.size:
                self._values.popitem(last=False)
        return value
