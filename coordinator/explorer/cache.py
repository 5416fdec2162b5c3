"""A small per-process cache of values that go stale: each kept for `ttl_s` seconds from when it was made, at
most `size` of them (the least recently used leave first). The explorer keeps each page's reads in one, so
that however often a page is asked for, and however long its reads take, they run at most once per `ttl_s`."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Fresh(Generic[K, V]):
    """Thread-safe. One make() per key runs at a time: a thread missing a key that another thread is making
    waits for that value instead of making it again (a slow chain is read once, not once per visitor). A
    make() that raises keeps nothing; a waiting thread then makes the value itself."""

    def __init__(self, size: int, ttl_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.size, self.ttl_s, self.clock = size, ttl_s, clock
        self._values: OrderedDict[K, tuple[float, V]] = OrderedDict()
        self._making: dict[K, threading.Event] = {}
        self._lock = threading.Lock()

    def get(self, key: K, make: Callable[[], V]) -> V:
        """The value of `key` if it was made less than `ttl_s` ago, else `make()` (kept)."""
        while True:
            with self._lock:
                kept = self._values.get(key)
                if kept is not None and self.clock() - kept[0] < self.ttl_s:
                    self._values.move_to_end(key)
                    return kept[1]
                making = self._making.get(key)
                if making is None:
                    making = self._making[key] = threading.Event()
                    break
            making.wait()
        try:
            value = make()
            with self._lock:
                # stamped when made: a value whose reads outlast ttl_s is still kept for ttl_s
                self._values[key] = (self.clock(), value)
                self._values.move_to_end(key)
                while len(self._values) > self.size:
                    self._values.popitem(last=False)
            return value
        finally:
            with self._lock:
                del self._making[key]
            making.set()
