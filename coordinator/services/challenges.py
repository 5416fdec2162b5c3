"""Answers the owner's challenges of a committed task's lines: each open one with the leaf the coordinator
committed at that position, its results proof and its served proofs (what the output file carries). An
unanswered challenge refunds the task and slashes the miners that signed it, so the worker answers as soon as
it sees one; the miners that signed hold the same leaves and answer too (miner/node/challenges.py)."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from client_sdk.results import ResultTrees
from coordinator.chain import CoordinatorChain

log = logging.getLogger("batchmarket.worker")


def answer(chain: CoordinatorChain, task_id: int, open_lines: Sequence[int], trees: ResultTrees) -> list[int]:
    """Answers the challenges of `open_lines` of task `task_id` from `trees`; returns the lines answered. A
    refused answer (someone answered first, or the period ran out) is logged and left."""
    answered = []
    for index, refusal in chain.answer_lines(trees, open_lines).items():
        if refusal is None:
            log.info("task %d: answered the owner's challenge of line %d", task_id, index)
            answered.append(index)
        else:
            log.warning("task %d: answering the challenge of line %d: %s", task_id, index, refusal)
    return answered
