"""Who may use a relay: only stages joined at the coordinator through it say hello (take a slot), and only
joined miners send through it. Without this, a stranger with fresh CURVE keys could hold every slot and fill
the queues of stages that never connect, and the miners behind the relay would get no service.

The members come from whoever knows them: the coordinator, asked by `keep_fresh` every REFRESH_S and soon
after the relay meets a key it does not know (a miner that joined since the last answer), or a local
pipeline that made its stages' keys itself. The relay holds a message from an unknown key until an answer
read after it arrived (`Admission.ask`, `view`), then delivers it or drops it, so an honest miner that joined
a moment ago loses nothing. Until the coordinator has answered once, nothing is answered: what comes is held
(within the relay's bounds) rather than dropped as a stranger's.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger(__name__)

REFRESH_S = 2.0  # how often the members are asked for anyway
MIN_REFRESH_S = 0.5  # the least time between two asks, however many unknown keys come (a stranger's flood)


@dataclass(frozen=True)
class RelayMembers:
    """The link keys a relay serves."""

    relayed: frozenset[bytes]  # stages joined through this relay: whose hellos it takes
    senders: frozenset[bytes]  # every joined miner: whose messages it forwards


NOBODY = RelayMembers(frozenset(), frozenset())


class MembersUnavailable(Exception):
    """The members could not be read now (the coordinator is unreachable or answered badly)."""


class Admission:
    """The members a relay serves now, shared between the relay's loop and whoever updates them.

    Asks are numbered: `ask` returns its number, and `view` names the highest number answered by an update
    read after that ask, so the relay knows when a held message's sender has been looked up. A `fixed`
    admission's members never change (a local pipeline knows its stages), so it answers every ask at once."""

    def __init__(self, members: RelayMembers = NOBODY, fixed: bool = False) -> None:
        self._members = members
        self._fixed = fixed
        self._asks = 0
        self._covered = 0
        self._lock = threading.Lock()
        self._asked = threading.Event()

    def ask(self) -> int:
        """Asks for fresh members (a key came that they do not name); returns this ask's number."""
        with self._lock:
            self._asks += 1
            self._asked.set()
            return self._asks

    def asks_so_far(self) -> int:
        """The number of the latest ask: an update read after this call answers it."""
        with self._lock:
            return self._asks

    def view(self) -> tuple[RelayMembers, int]:
        """The members now and the highest ask they answer."""
        with self._lock:
            return self._members, self._asks if self._fixed else self._covered

    def update(self, members: RelayMembers, answers: int | None = None) -> None:
        """New members, read after ask number `answers` (default: after every ask so far)."""
        with self._lock:
            self._members = members
            self._covered = max(self._covered, self._asks if answers is None else answers)

    def wait_for_ask(self, timeout_s: float, stop: threading.Event) -> None:
        """Returns when asked, when `stop` is set, or after `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while not stop.is_set() and (left := deadline - time.monotonic()) > 0:
            if self._asked.wait(min(left, 0.1)):
                break
        self._asked.clear()


def keep_fresh(
    admission: Admission,
    fetch: Callable[[], RelayMembers],
    stop: threading.Event,
    every_s: float = REFRESH_S,
    min_gap_s: float = MIN_REFRESH_S,
) -> None:
    """Updates `admission` from `fetch` every `every_s`, and soon (at most every `min_gap_s`) after an ask,
    until `stop` is set. When `fetch` fails the members stay as they were and, once one read has succeeded,
    the asks still count as answered (a held message is decided on what is known rather than held for as
    long as the coordinator is away); anything `fetch` raises is such a failure, so the loop never dies."""
    failing, answered_once = False, False
    while not stop.is_set():
        answers = admission.asks_so_far()
        try:
            members = fetch()
        except Exception as exc:  # a hostile answer must not end the loop: held messages would wait forever
            if not failing:  # once, not every few seconds while it lasts
                log.warning("the relay keeps its members as they were: %s", exc)
            failing = True
            if answered_once:
                admission.update(admission.view()[0], answers)
        else:
            if failing:
                log.warning("the relay's members are read again")
            failing, answered_once = False, True
            admission.update(members, answers)
        if stop.wait(min_gap_s):
            return
        if admission.asks_so_far() <= admission.view()[1]:  # else asks wait for a first answer: try again
            admission.wait_for_ask(max(0.0, every_s - min_gap_s), stop)
