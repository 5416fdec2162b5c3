"""Redis locks held on a short lease that their holder renews while it works.

A fixed long timeout outlives its holder: a worker killed mid-step, or one whose release failed because Redis
was down at that moment, held a batch for the whole timeout (52 s measured after a Redis kill). Here the key
lives `lease_s` and a thread renews it every third of that while the holder runs, so a step may take as long
as it needs, and a holder that is gone (or cannot reach Redis to renew) frees the lock within one lease.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator

from redis import Redis
from redis.exceptions import LockError, RedisError

log = logging.getLogger("batchmarket.worker")
LEASE_S = 10.0


@contextlib.contextmanager
def leased_lock(
    redis: Redis, name: str, lease_s: float = LEASE_S, wait_s: float | None = None
) -> Iterator[bool]:
    """Takes the lock `name` (at once, or within `wait_s` if given) and yields whether it did; while the block
    runs the lease is renewed, and on leaving the lock is released (if Redis cannot be reached then, the
    lease ends it within `lease_s`)."""
    # not thread-local: the renewing thread must see the token the holder's thread took
    lock = redis.lock(
        name, timeout=lease_s, blocking=wait_s is not None, blocking_timeout=wait_s, thread_local=False
    )
    if not lock.acquire():
        yield False
        return
    done = threading.Event()

    def renew() -> None:
        while not done.wait(lease_s / 3):
            try:
                lock.extend(lease_s, replace_ttl=True)
            except (LockError, RedisError) as exc:  # lost it (Redis restarted) or cannot reach it: the step
                log.warning("could not renew the lease of %s: %s", name, exc)  # goes on, idempotent

    renewer = threading.Thread(target=renew, daemon=True, name=f"lease {name}")
    renewer.start()
    try:
        yield True
    finally:
        done.set()
        renewer.join()
        with contextlib.suppress(LockError, RedisError):
            lock.release()
