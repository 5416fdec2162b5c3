"""Answers the owner's challenges of a committed task's lines: each open one with the leaf the coordinator
committed at that position, its results proof and its served proofs (what the output file carries). An
unanswered challenge refunds the task and slashes the miners that signed it, so the worker answers as soon as
it sees one; the miners that signed hold the same leaves and answer too (miner/node/challenges.py)."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from client_sdk.errors import ContractRevert
from client_sdk.results import ResultTrees
from coordinator.chain import CoordinatorChain

log = logging.getLogger("batchmarket.worker")


def answer(chain: CoordinatorChain, task_id: int, open_lines: Sequence[int], trees: ResultTrees) -> list[int]:
    """Answers the challenges of `open_lines` of task `task_id` from `trees`; returns the lines answered. A
    refused answer (someone answered first, or the period ran out) is logged and left."""
    answered = []
    for index in open_lines:
        if index >= len(trees.leaves):
            log.error("task %d: line %d was challenged but the batch has no such line", task_id, index)
            continue
        try:
            chain.answer_line(trees.leaves[index], trees.proof(index), trees.served_proofs(index))
        except ContractRevert as exc:
            log.warning("task %d: answering the challenge of line %d: %s", task_id, index, exc)
            continue
        log.info("task %d: answered the owner's challenge of line %d", task_id, index)
        answered.append(index)
    return answered
