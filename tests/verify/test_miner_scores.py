"""A verifier's per-miner score: the mean clipped gap per token over the miner's most recent 300 re-scored
tokens; a miner is reported once, when its full window first scores above the suspect line."""

from __future__ import annotations

import pytest

from miner.verify.miner_scores import SUSPECT_SCORE, WINDOW_TOKENS, MinerScores
from miner.verify.policy import LineStats

HONEST = LineStats(tokens=100, mismatches=0, gap_sum=0.0)
CHEAP = LineStats(tokens=100, mismatches=40, gap_sum=12.0)  # 0.12 per token, as an int4 copy


def test_no_score_before_the_window_is_full() -> None:
    scores = MinerScores()
    assert scores.add(["0xA"], CHEAP) == [] and scores.add(["0xA"], CHEAP) == []
    assert scores.score("0xa") is None
    assert scores.add(["0xA"], CHEAP) == ["0xA"]
    assert scores.score("0xA") == pytest.approx(0.12)


def test_every_miner_of_the_pipeline_is_scored_and_reported_once() -> None:
    scores = MinerScores()
    for _ in range(WINDOW_TOKENS // 100):
        reported = scores.add(["0xA", "0xB"], CHEAP)
    assert reported == ["0xA", "0xB"]
    assert scores.add(["0xA", "0xB"], CHEAP) == []
    assert scores.suspects == {"0xa", "0xb"}


def test_an_honest_miner_stays_unreported_and_old_lines_leave_the_window() -> None:
    scores = MinerScores()
    for _ in range(10):
        assert scores.add(["0xC"], HONEST) == []
    assert scores.score("0xC") == 0.0
    # a few near-ties, as a bfloat16 miner's, stay under the line
    assert scores.add(["0xC"], LineStats(tokens=100, mismatches=1, gap_sum=0.3)) == []
    assert scores.score("0xC") == pytest.approx(0.3 / 300)
    assert SUSPECT_SCORE > 0.3 / 300
    for _ in range(3):  # the near-tie line leaves the window
        scores.add(["0xC"], HONEST)
    assert scores.score("0xC") == 0.0
