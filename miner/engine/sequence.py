"""A request in flight: its tokens, its sampling parameters and how much of it the KV cache holds."""

from __future__ import annotations

import collections.abc
from dataclasses import dataclass, field


@dataclass(frozen=True)
class SamplingParams:
    max_tokens: int = 16
    temperature: float = 0.0  # 0 means greedy
    top_p: float = 1.0
    seed: int = 0
    stop_token_ids: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if self.max_tokens < 1:
            raise ValueError("max_tokens must be at least 1")
        if self.temperature < 0:
            raise ValueError("temperature must not be negative")
        if not 0 < self.top_p <= 1:
            raise ValueError("top_p must be in (0, 1]")

    def completed_by(self, output: collections.abc.Sequence[int]) -> bool:
        """Whether `output` is already a whole output (max_tokens long, or holding a stop token), so there is
        nothing to resume."""
        return len(output) >= self.max_tokens or any(t in self.stop_token_ids for t in output)


@dataclass
class Sequence:
    seq_id: int
    prompt: list[int]
    params: SamplingParams
    # generated so far; a resumed request starts with the tokens generated before (max_tokens counts them)
    output: list[int] = field(default_factory=list)
    num_cached: int = 0  # tokens whose keys and values are in the cache
    finished: bool = False

    @property
    def tokens(self) -> list[int]:
        return self.prompt + self.output

    @property
    def num_uncached(self) -> int:
        return len(self.prompt) + len(self.output) - self.num_cached

    def append(self, token: int) -> None:
        self.output.append(token)
        if len(self.output) >= self.params.max_tokens or token in self.params.stop_token_ids:
            self.finished = True
