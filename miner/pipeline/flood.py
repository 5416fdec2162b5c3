"""Test-only: a first stage that floods the next one with requests it never finishes, the fault matrix's
hostile previous stage (bench/faults.py).

`miner serve` becomes one only when BATCHMARKET_TEST_FLOOD=COUNT is set: then each SIGUSR1 the node gets
makes the next step its first stage sends on carry COUNT more requests, new, one token each, which never
sample and which no later step names, finishes or preempts: each holds a page of the next stage until that
stage reclaims it (a request unnamed past its bound, or the session it came in ending). The stage's own
pages and scheduler never see them, as a hostile peer's would not. A flood armed in one session of the head
is dropped when the head starts a new one: the attack is a burst, not a siege of the flooder's own pipeline.
"""

from __future__ import annotations

import os
import signal
import threading
from dataclasses import replace

import torch

from client_sdk.protocol.sampling import SamplingParams
from miner.transport.frames import Header, RequestSpec

ENV = "BATCHMARKET_TEST_FLOOD"
FIRST_ID = 1 << 62  # far from the ids a node derives for its lines (miner.node.requests)
# a message's request limit (miner.transport.frames.Limits.max_requests): a flood that takes the step past it
# with the step's own requests is refused whole by the wire, as malformed
MAX_COUNT = 4096


class Flood:
    """Adds `count` never-finished requests to the next outgoing step after each `arm`."""

    def __init__(self, count: int) -> None:
        if not 0 < count <= MAX_COUNT:
            raise ValueError(f"{ENV} must be a count from 1 to {MAX_COUNT}, not {count}")
        self.count = count
        self.bursts = 0  # floods sent so far
        self._armed = threading.Event()
        self._epoch: tuple[int, int] | None = None  # of the last step sent on
        self._armed_in: tuple[int, int] | None = None  # the epoch of the step before the flood was armed
        self._next_id = FIRST_ID

    def arm(self) -> None:
        """The next step sent on in the head's current session carries a flood (safe from a signal
        handler)."""
        self._armed_in = self._epoch
        self._armed.set()

    def __call__(self, header: Header, tensor: torch.Tensor) -> tuple[Header, torch.Tensor]:
        """`header` and its activations, with the flood's requests appended when armed in its session."""
        self._epoch = header.epoch
        if not self._armed.is_set():
            return header, tensor
        self._armed.clear()
        if self._armed_in is not None and self._armed_in != header.epoch:
            return header, tensor  # armed in a session that has ended
        ids = tuple(range(self._next_id, self._next_id + self.count))
        self._next_id += self.count
        self.bursts += 1
        zeros = torch.zeros(self.count, *tensor.shape[1:], dtype=tensor.dtype)
        params = SamplingParams(max_tokens=1)
        flooded = replace(
            header,
            request_ids=header.request_ids + ids,
            positions=header.positions + (0,) * self.count,
            query_lens=header.query_lens + (1,) * self.count,
            token_ids=header.token_ids + (0,) * self.count,
            sample=header.sample + (False,) * self.count,
            new_requests=header.new_requests + tuple(RequestSpec(i, 1, params) for i in ids),
            shape=(tensor.shape[0] + self.count, *tensor.shape[1:]),
        )
        return flooded, torch.cat([tensor, zeros])


def from_environment() -> Flood | None:
    """The flood BATCHMARKET_TEST_FLOOD asks for, armed by SIGUSR1 from now on; None when it is unset. Call
    from the main thread (signal handlers are installed there)."""
    value = os.environ.get(ENV)
    if not value:
        return None
    flood = Flood(int(value))
    signal.signal(signal.SIGUSR1, lambda _signum, _frame: flood.arm())
    return flood
