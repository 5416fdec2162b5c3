"""SharedRead: a caller never gets the outcome of a read that began before it asked; the callers that came
during a read share the next one (so any number of callers cost one read at a time); an error reaches the
callers of its read, and the next caller reads again."""

from __future__ import annotations

import threading

import anyio
import pytest

from coordinator.api.shared_read import SharedRead


class Source:
    """A value read on a worker thread; `gate`, when set, holds each read until opened."""

    def __init__(self) -> None:
        self.value = 1
        self.reads = 0
        self.gate: threading.Event | None = None
        self.reading = threading.Event()
        self.fails = False

    def __call__(self) -> int:
        self.reads += 1
        value = self.value  # what a read sees is what was there when it began
        self.reading.set()
        if self.gate is not None:
            self.gate.wait(5)
        if self.fails:
            raise RuntimeError("the database is away")
        return value


def test_callers_during_a_read_share_the_next_one_and_see_what_changed() -> None:
    source = Source()
    source.gate = threading.Event()
    shared = SharedRead(source)
    got: dict[str, int] = {}

    async def call(name: str) -> None:
        got[name] = await shared()

    async def main() -> None:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(call, "first")
            await anyio.to_thread.run_sync(source.reading.wait)  # the first read has begun
            source.value = 2  # a miner joins now
            for name in ("second", "third", "fourth"):
                tasks.start_soon(call, name)
            await anyio.sleep(0.05)
            source.gate.set()

    anyio.run(main)
    assert got == {"first": 1, "second": 2, "third": 2, "fourth": 2}
    assert source.reads == 2


def test_an_error_reaches_the_callers_of_its_read_and_the_next_caller_reads_again() -> None:
    source = Source()
    source.fails = True
    shared = SharedRead(source)
    with pytest.raises(RuntimeError, match="the database is away"):
        anyio.run(shared)
    source.fails = False
    assert anyio.run(shared) == 1 and source.reads == 2
