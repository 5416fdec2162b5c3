"""A lock in Redis held on a renewed lease (the worker's per-batch lock and the coordinator's sending lock): a
holder keeps it as long as it works, however long that is, and a holder that is gone (killed with SIGKILL, no
release) frees it within one lease instead of holding the batch for a minute."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

from redis import Redis

from coordinator.leases import leased_lock

HOLD = """
import sys, time
from redis import Redis
from coordinator.leases import leased_lock
with leased_lock(Redis.from_url(sys.argv[1]), "lock:batch:gone", lease_s=1.0) as held:
    print("held" if held else "refused", flush=True)
    time.sleep(600)
"""


def test_a_holder_that_is_gone_frees_the_lock_within_its_lease(redis_url: str) -> None:
    redis = Redis.from_url(redis_url)
    holder = subprocess.Popen([sys.executable, "-c", HOLD, redis_url], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        time.sleep(2.0)  # two leases: the holder renews it
        with leased_lock(redis, "lock:batch:gone") as held:
            assert not held
        holder.send_signal(signal.SIGKILL)  # gone without a release
        holder.wait(timeout=10)
        with leased_lock(redis, "lock:batch:gone", wait_s=30.0) as held:
            assert held
            ttl_ms = redis.pttl("lock:batch:gone")
    finally:
        holder.kill()
    assert 0 < ttl_ms <= 10_000  # the next holder's own lease
    assert redis.exists("lock:batch:gone") == 0  # released on leaving


def test_a_holder_keeps_its_lock_past_the_lease_while_it_works(redis_url: str) -> None:
    redis = Redis.from_url(redis_url)
    with leased_lock(redis, "lock:batch:busy", lease_s=0.5) as held:
        assert held
        time.sleep(2.0)  # four leases
        with leased_lock(redis, "lock:batch:busy") as other:
            assert not other
    with leased_lock(redis, "lock:batch:busy") as other:
        assert other
