"""Warnings that a peer can cause at will, logged at most once per interval for each kind.

A stranger, a hostile peer or a flood of late frames can make a process warn once per message it drops: 6.2 MB
of miner log in 25 s was measured. Each kind of warning (a name the code chooses, never one taken from the
input) is logged when it first happens and then at most once per `interval_s`, saying how many like it were
left out meanwhile; the counters the process keeps still count every one.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

INTERVAL_S = 10.0
MAX_KINDS = 64  # kinds are the code's own names; a bound all the same


class ThrottledLog:
    def __init__(
        self,
        logger: logging.Logger,
        interval_s: float = INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.logger = logger
        self.interval_s = interval_s
        self._clock = clock
        self._last: dict[str, float] = {}  # kind -> when one was last logged
        self._left_out: dict[str, int] = {}  # kind -> how many were not logged since

    def warning(self, kind: str, message: str, *args: object) -> None:
        """Logs `message % args` unless a warning of `kind` was logged less than `interval_s` ago."""
        now = self._clock()
        last = self._last.get(kind)
        if last is not None and now - last < self.interval_s:
            self._left_out[kind] = self._left_out.get(kind, 0) + 1
            return
        if last is None and len(self._last) >= MAX_KINDS:
            oldest = next(iter(self._last))
            del self._last[oldest]
            self._left_out.pop(oldest, None)
        self._last[kind] = now
        left_out = self._left_out.pop(kind, 0)
        if left_out:
            message += " (and %d more like it in the last %.0f s)"
            args = (*args, left_out, now - last if last is not None else 0.0)
        self.logger.warning(message, *args)
