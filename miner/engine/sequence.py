"""A request in flight: its tokens, its sampling parameters and how much of it the KV cache holds."""

from __future__ import annotations

from dataclasses import dataclass, field

from client_sdk.protocol.sampling import SamplingParams


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
