"""A verifier's running score of each miner it has judged lines of: over the most recent WINDOW_TOKENS output
tokens of that miner's re-scored lines, the mean gap per token of the tokens the reference would not have
chosen (each gap clipped to the policy's epsilon: policy.LineStats).

A cheaper copy of the model (quantized weights) draws what the reference draws at most positions and differs
only near ties, so its lines pass one by one; over a few hundred tokens it scores far above an honest miner.
bench/results/verification_error_rates.txt measures it on SmolLM2 over windows of 300 sampled tokens: honest
float32 miners score 0 and bfloat16 ones at most 0.0033, int4 copies at least 0.26 (every window above every
honest one), int8 copies from 0.0008 (above every float32 window, mostly above the bfloat16 ones).
SUSPECT_SCORE sits 3x above the honest bfloat16 maximum.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from miner.verify.policy import LineStats

WINDOW_TOKENS = 300
SUSPECT_SCORE = 0.01


@dataclass
class _Window:
    """A miner's most recent lines: the fewest that hold WINDOW_TOKENS tokens (or all, while fewer do)."""

    lines: deque[LineStats] = field(default_factory=deque)

    @property
    def tokens(self) -> int:
        return sum(line.tokens for line in self.lines)

    def add(self, stats: LineStats) -> None:
        self.lines.append(stats)
        while self.tokens - self.lines[0].tokens >= WINDOW_TOKENS:
            self.lines.popleft()

    def score(self) -> float:
        return sum(line.gap_sum for line in self.lines) / self.tokens


class MinerScores:
    """Scores by miner address; a miner is scored once its window holds WINDOW_TOKENS tokens."""

    def __init__(self) -> None:
        self._windows: dict[str, _Window] = {}
        self.suspects: set[str] = set()

    def add(self, miners: Iterable[str], stats: LineStats) -> list[str]:
        """Adds a judged line to each miner of the pipeline that served it; returns the miners that become
        suspect with it (a miner already suspect is not returned again)."""
        newly = []
        for miner in miners:
            window = self._windows.setdefault(miner.lower(), _Window())
            window.add(stats)
            score = self.score(miner)
            if score is not None and score > SUSPECT_SCORE and miner.lower() not in self.suspects:
                self.suspects.add(miner.lower())
                newly.append(miner)
        return newly

    def score(self, miner: str) -> float | None:
        """The miner's mean clipped gap per token over its window, or None before the window is full."""
        window = self._windows.get(miner.lower())
        if window is None or window.tokens < WINDOW_TOKENS:
            return None
        return window.score()
