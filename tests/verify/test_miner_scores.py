"""A verifier's per-miner score: the mean clipped gap per token over the miner's most recent 300 audited
tokens; a miner is reported once, when its full window first scores above the suspect line, and is suspect
while its window does; a line judged twice (by its auditor, then on its audit's jury) counts once."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from miner.verify.miner_scores import SUSPECT_SCORE, WINDOW_TOKENS, MinerScores
from miner.verify.policy import LineStats

HONEST = LineStats(tokens=100, mismatches=0, gap_sum=0.0)
CHEAP = LineStats(tokens=100, mismatches=40, gap_sum=12.0)  # 0.12 per token, as an int4 copy


def test_no_score_before_the_window_is_full() -> None:
    scores = MinerScores()
    assert scores.add((1, 0), ["0xA"], CHEAP) == [] and scores.add((2, 0), ["0xA"], CHEAP) == []
    assert scores.score("0xa") is None and not scores.suspect("0xA")
    assert scores.add((3, 0), ["0xA"], CHEAP) == ["0xA"]
    assert scores.score("0xA") == pytest.approx(0.12) and scores.suspect("0xa")


def test_every_miner_of_the_pipeline_is_scored_and_reported_once() -> None:
    scores = MinerScores()
    for task in range(WINDOW_TOKENS // 100):
        reported = scores.add((task, 0), ["0xA", "0xB"], CHEAP)
    assert reported == ["0xA", "0xB"]
    assert scores.add((99, 0), ["0xA", "0xB"], CHEAP) == []
    assert scores.reported == {"0xa", "0xb"}


def test_a_line_judged_twice_counts_once() -> None:
    """The auditor judges the line, then sits on no jury of it; another verifier judges it when auditing and
    again on the jury: its window must not hold it twice."""
    scores = MinerScores()
    for _ in range(5):
        scores.add((7, 3), ["0xA"], CHEAP)
    assert scores.score("0xA") is None  # still 100 tokens, not 500
    scores.add((7, 4), ["0xA"], CHEAP)  # another line of the same task counts
    scores.add((8, 3), ["0xA"], CHEAP)
    assert scores.score("0xA") == pytest.approx(0.12)


def test_an_honest_miner_stays_unsuspected_and_old_lines_leave_the_window() -> None:
    scores = MinerScores()
    for task in range(10):
        assert scores.add((task, 0), ["0xC"], HONEST) == []
    assert scores.score("0xC") == 0.0
    # a few near-ties, as a bfloat16 miner's, stay under the line
    assert scores.add((10, 0), ["0xC"], LineStats(tokens=100, mismatches=1, gap_sum=0.3)) == []
    assert scores.score("0xC") == pytest.approx(0.3 / 300)
    assert SUSPECT_SCORE > 0.3 / 300
    for task in range(11, 14):  # the near-tie line leaves the window
        scores.add((task, 0), ["0xC"], HONEST)
    assert scores.score("0xC") == 0.0


def test_a_miner_that_turns_honest_stops_being_suspect() -> None:
    scores = MinerScores()
    for task in range(3):
        scores.add((task, 0), ["0xD"], CHEAP)
    assert scores.suspect("0xD")
    for task in range(3, 6):
        scores.add((task, 0), ["0xD"], HONEST)
    assert not scores.suspect("0xD") and scores.reported == {"0xd"}


@given(st.lists(st.tuples(st.integers(1, 200), st.floats(0, 1)), min_size=1, max_size=40))
def test_the_window_is_the_fewest_latest_lines_holding_the_window_s_tokens(
    lines: list[tuple[int, float]],
) -> None:
    scores = MinerScores()
    stats = [LineStats(tokens, 0, tokens * gap) for tokens, gap in lines]
    for task, line in enumerate(stats):
        scores.add((task, 0), ["0xE"], line)
    kept: list[LineStats] = []
    for line in reversed(stats):  # the latest lines, back to the first that completes WINDOW_TOKENS
        kept.append(line)
        if sum(k.tokens for k in kept) >= WINDOW_TOKENS:
            break
    tokens = sum(k.tokens for k in kept)
    expected = sum(k.gap_sum for k in kept) / tokens if tokens >= WINDOW_TOKENS else None
    assert scores.score("0xE") == (pytest.approx(expected) if expected is not None else None)
