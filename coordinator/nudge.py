"""Tells the workers that a batch may have something to do now (a unit's results, or a miner's signature,
just came in), so it moves on without waiting for the next sweep. Best effort: the sweep still finds every
batch, so a lost nudge only costs time."""

from __future__ import annotations

import logging

from celery import Celery
from kombu.exceptions import KombuError

log = logging.getLogger("batchmarket.api")
ADVANCE = "batchmarket.advance"  # the worker's lifecycle step (coordinator.worker)


class Nudger:
    def __init__(self, broker_url: str) -> None:
        self._celery = Celery("batchmarket", broker=broker_url)

    def __call__(self, batch_id: str) -> None:
        try:
            self._celery.send_task(ADVANCE, args=[batch_id])
        except (KombuError, OSError) as exc:
            log.warning("could not nudge the workers about %s: %s", batch_id, exc)
