"""The seed a result line is sampled with, which every party derives alike (miners to sample, the coordinator
to write it into the result, verifiers to re-score): the request's own `seed`, or one derived from the task
and the line when the request has none, so every sampled line is reproducible and checkable, and the same
unseeded request in two tasks is sampled afresh. docs/sampling.md is the whole protocol (with the noise the
seed drives)."""

from __future__ import annotations

import hashlib

from client_sdk.protocol.constants import MAX_SEED

_DOMAIN = b"batchmarket seed v1"
LOCAL_TASK_ID = 0  # what `miner run-local`, which serves no on-chain task, derives seeds with


def line_seed(task_id: int, custom_id: str, requested: int | None) -> int:
    """`requested` when given, else the first 63 bits of SHA-256(domain, task id as 8 bytes, custom_id)."""
    if requested is not None:
        return requested
    digest = hashlib.sha256(_DOMAIN + task_id.to_bytes(8, "big") + custom_id.encode()).digest()
    return int.from_bytes(digest[:8], "big") & MAX_SEED
