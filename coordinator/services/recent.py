"""A small per-process cache of what is made once per key, kept for the few keys used last: values that never
change once made (an uploaded file's lines, the result trees of a committed batch), or objects that keep
their own state under their own lock (the explorer's event-log readers, coordinator.explorer.logs)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Recent(Generic[K, V]):
    """The values of the last `size` keys asked for; thread-safe (the API calls from its worker threads). Two
    threads missing the same key at once both make it and the later one is kept (a value is the same either
    way; a reader made twice only reads its first spans twice), and nothing waits on a lock while it is
    made."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._values: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K, make: Callable[[], V]) -> V:
        with self._lock:
            if key in self._values:
                self._values.move_to_end(key)
                return self._values[key]
        value = make()
        with self._lock:
            self._values[key] = value
            while len(self._values) > self.size:
                self._values.popitem(last=False)
        return value
