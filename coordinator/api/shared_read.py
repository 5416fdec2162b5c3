"""One read at a time for any number of callers: each caller gets the outcome of a read that began after it
asked, and the callers waiting then share that read. A public endpoint that reads a lot (every live miner)
costs one read at a time however hard it is called, and no caller gets an answer older than its question."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Generic, TypeVar

import anyio

T = TypeVar("T")


class SharedRead(Generic[T]):
    """Calls `read` (blocking, on a worker thread) for its callers, one read at a time (see the module)."""

    def __init__(self, read: Callable[[], T]) -> None:
        self._read = read
        self._lock = asyncio.Lock()  # fair: callers take it in the order they came
        self._started = 0  # reads begun so far
        self._outcome: T | Exception | None = None  # of the latest read

    async def __call__(self) -> T:
        wanted = self._started + 1  # the first read to begin from now on
        async with self._lock:
            if self._started < wanted:
                self._started += 1
                try:
                    self._outcome = await anyio.to_thread.run_sync(self._read)
                except Exception as exc:  # its callers all get the error; the next caller reads again
                    self._outcome = exc
            outcome = self._outcome
        if isinstance(outcome, Exception):
            raise outcome
        return outcome  # type: ignore[return-value]  # set by the read this caller waited for
