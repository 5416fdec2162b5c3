"""A verifier's running score of each miner over the randomly audited lines it judged: over the most recent
WINDOW_TOKENS output tokens of that miner's audited lines, the mean gap per token of the tokens the reference
would not have chosen (each gap clipped to the policy's epsilon: policy.LineStats).

A cheaper copy of the model (quantized weights) draws what the reference draws at most positions and differs
only near ties, so its lines pass one by one; over a few hundred tokens it scores far above an honest miner.
bench/results/verification_error_rates.txt measures it on SmolLM2 over windows of 300 sampled tokens: honest
float32 miners score 0 and bfloat16 ones at most 0.0033, int4 copies at least 0.26 (every window above every
honest one), int8 copies from 0.0008 (above every float32 window, mostly above the bfloat16 ones).
SUSPECT_SCORE sits 3x above the honest bfloat16 maximum.

Only audited lines count: the chain picks them at random after the results are committed, so neither the
miner (which cannot serve them better) nor anyone wishing it harm (who cannot pick an honest miner's worst
lines, as an owner picking lines to dispute could) chooses what is scored. A line counts once per window
however often it is judged (by its auditor, then again on its audit's jury).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from miner.verify.policy import LineStats

WINDOW_TOKENS = 300
SUSPECT_SCORE = 0.01

LineKey = tuple[int, int]  # (task id, request index): one committed line


@dataclass
class _Window:
    """A miner's most recent lines: the fewest that hold WINDOW_TOKENS tokens (or all, while fewer do)."""

    lines: deque[tuple[LineKey, LineStats]] = field(default_factory=deque)

    @property
    def tokens(self) -> int:
        return sum(stats.tokens for _, stats in self.lines)

    def holds(self, key: LineKey) -> bool:
        return any(held == key for held, _ in self.lines)

    def add(self, key: LineKey, stats: LineStats) -> None:
        self.lines.append((key, stats))
        while self.tokens - self.lines[0][1].tokens >= WINDOW_TOKENS:
            self.lines.popleft()

    def score(self) -> float:
        return sum(stats.gap_sum for _, stats in self.lines) / self.tokens


class MinerScores:
    """Scores by miner address; a miner is scored once its window holds WINDOW_TOKENS tokens."""

    def __init__(self) -> None:
        self._windows: dict[str, _Window] = {}
        self.reported: set[str] = set()

    def add(self, line: LineKey, miners: Iterable[str], stats: LineStats) -> list[str]:
        """Adds an audited line to the window of each miner of the pipeline that served it (unless that window
        holds it already); returns the miners first found suspect with it (each is returned once)."""
        newly = []
        for miner in miners:
            window = self._windows.setdefault(miner.lower(), _Window())
            if window.holds(line):
                continue
            window.add(line, stats)
            if self.suspect(miner) and miner.lower() not in self.reported:
                self.reported.add(miner.lower())
                newly.append(miner)
        return newly

    def score(self, miner: str) -> float | None:
        """The miner's mean clipped gap per token over its window, or None before the window is full."""
        window = self._windows.get(miner.lower())
        if window is None or window.tokens < WINDOW_TOKENS:
            return None
        return window.score()

    def suspect(self, miner: str) -> bool:
        """Whether the miner's full window scores above SUSPECT_SCORE now."""
        score = self.score(miner)
        return score is not None and score > SUSPECT_SCORE
