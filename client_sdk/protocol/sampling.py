"""How a request is sampled, as every party must agree: its sampling parameters (which stages pass to each
other, and miners and verifiers read from a batch line alike) and the seed a result line is sampled with
(miners to sample, the coordinator to write it into the result, verifiers to re-score): the request's own
`seed`, or one derived from the task and the line when the request has none, so every sampled line is
reproducible and checkable, and the same unseeded request in two tasks is sampled afresh. docs/sampling.md is
the whole protocol (with the noise the seed drives)."""

from __future__ import annotations

import collections.abc
import hashlib
import math
from dataclasses import dataclass

from client_sdk.protocol.constants import MAX_SEED
from client_sdk.protocol.fields import is_int, is_number


@dataclass(frozen=True)
class SamplingParams:
    """A request's sampling: at most `max_tokens` output tokens, drawn at `temperature` (0: greedy) from the
    smallest set of tokens holding `top_p` of the probability, with `seed`; a token of `stop_token_ids` ends
    it. Construction checks every field (ValueError naming it)."""

    max_tokens: int = 16
    temperature: float = 0.0  # 0 means greedy
    top_p: float = 1.0
    seed: int = 0
    stop_token_ids: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if not is_int(self.max_tokens) or self.max_tokens < 1:
            raise ValueError(f"max_tokens must be an integer of at least 1, not {self.max_tokens!r}")
        temperature = self.temperature
        if not is_number(temperature) or not (math.isfinite(temperature) and temperature >= 0):
            raise ValueError(f"temperature must be a finite non-negative number, not {self.temperature!r}")
        if not is_number(self.top_p) or not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be a number in (0, 1], not {self.top_p!r}")
        if not is_int(self.seed) or not 0 <= self.seed <= MAX_SEED:
            raise ValueError(f"seed must be an integer from 0 to {MAX_SEED}, not {self.seed!r}")
        if not all(is_int(t) and t >= 0 for t in self.stop_token_ids):
            raise ValueError(f"stop_token_ids must be non-negative integers, not {self.stop_token_ids!r:.60}")

    def completed_by(self, output: collections.abc.Sequence[int]) -> bool:
        """Whether `output` is already a whole output (max_tokens long, or holding a stop token), so there is
        nothing to resume."""
        return len(output) >= self.max_tokens or any(t in self.stop_token_ids for t in output)

    def to_wire(self) -> list[object]:
        """The msgpack form stages send: [max_tokens, temperature, top_p, seed, [stop token ids]]."""
        return [self.max_tokens, self.temperature, self.top_p, self.seed, list(self.stop_token_ids)]

    @classmethod
    def from_wire(cls, raw: object, max_stop_tokens: int) -> SamplingParams:
        """The inverse of `to_wire`, with at most `max_stop_tokens` stop tokens; ValueError naming the
        field."""
        if not isinstance(raw, list) or len(raw) != 5:
            raise ValueError("sampling parameters must be [max_tokens, temperature, top_p, seed, stop ids]")
        max_tokens, temperature, top_p, seed, stop = raw
        if not isinstance(stop, list) or len(stop) > max_stop_tokens:
            raise ValueError(f"stop_token_ids must be a list of at most {max_stop_tokens} integers")
        for name, value in (("temperature", temperature), ("top_p", top_p)):
            if not is_number(value):
                raise ValueError(f"{name} must be a number, not {value!r:.40}")
        return cls(max_tokens, float(temperature), float(top_p), seed, tuple(stop))


_DOMAIN = b"batchmarket seed v1"
LOCAL_TASK_ID = 0  # what `miner run-local`, which serves no on-chain task, derives seeds with


def line_seed(task_id: int, custom_id: str, requested: int | None) -> int:
    """`requested` when given, else the first 63 bits of SHA-256(domain, task id as 8 bytes, custom_id)."""
    if requested is not None:
        return requested
    digest = hashlib.sha256(_DOMAIN + task_id.to_bytes(8, "big") + custom_id.encode()).digest()
    return int.from_bytes(digest[:8], "big") & MAX_SEED
