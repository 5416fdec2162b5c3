"""Head sessions on real stages (StageHosts of a tiny model, wired as `miner serve` wires them): every message
carries its epoch (plan version, head session), so a restarted head's next stage frees what the old session
held, a stage that lost its records is caught up by the head's next session, and a newer plan's first steps
wait at a stage until its node follows that plan. Each pipeline then serves lines exactly as a healthy one
did, within a bound far below the driver's 120 s idle timeout (which is what each fault cost before)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from client_sdk.protocol.sampling import SamplingParams
from miner.node.stage_host import StageHost
from miner.pipeline.driver import Request
from miner.pipeline.stage import CacheSettings
from miner.tiny_checkpoint import build_tiny_model
from tests.miner.nodes import stage_hosts

SPLITS = [(0, 2), (2, 4)]
# 8 pages of 16 tokens per microbatch on each stage: one request of 125 tokens fills its microbatch
TIGHT = CacheSettings(local_pages=8, max_seqs=4)
LIVENESS_S = 30.0  # far above the second or two each run takes; far below the driver's 120 s idle timeout


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("session-model"))


def requests(first_id: int, count: int) -> list[Request]:
    """`count` sampled requests of 5 prompt tokens and 120 output tokens (no stop token)."""
    return [
        (first_id + i, [3 + i, 5, 7, 11, 13], SamplingParams(max_tokens=120, temperature=0.7, seed=i))
        for i in range(count)
    ]


def serve(head: StageHost, batch: list[Request]) -> list[tuple[int, ...]]:
    """The outputs of `batch`, in order, through the pipeline `head` drives."""
    assert head.driver is not None
    head.driver.submit(batch)
    done = head.driver.wait_for([r for r, _, _ in batch], idle_timeout_s=LIVENESS_S)
    return [done[r] for r, _, _ in batch]


def wait_until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + LIVENESS_S
    while not condition():
        assert time.monotonic() < deadline, "the pipeline never reached the state the test waits for"
        time.sleep(0.002)


def running(head: StageHost, count: int, tokens: int) -> Callable[[], bool]:
    """`count` requests each have at least `tokens` output tokens and are not finished."""
    return lambda: len(p := head.progress()) == count and all(len(o) >= tokens for o in p.values())


def test_a_restarted_head_frees_what_its_old_session_held_at_the_next_stage(checkpoint: Path) -> None:
    with stage_hosts(checkpoint, SPLITS, cache=TIGHT) as (head, second):
        reference = serve(head, requests(100, 2))
        assert head.driver is not None and head.assignment is not None
        head.driver.submit(requests(0, 4))
        wait_until(running(head, 4, 45))
        assignment = head.assignment
        head.stop()  # the head dies mid-unit
        assert second.worker is not None
        # its four requests hold at least 3 pages each at the next stage: too few are free for the next lines
        assert sum(blocks.free_pages for blocks in second.worker.ledger.blocks) <= 4
        head.follow(assignment)  # restarted: a new session of the same plan
        assert serve(head, requests(200, 2)) == reference
        assert head.worker is not None and second.worker.epoch == head.worker.epoch


def test_a_stage_that_lost_its_records_is_caught_up_by_the_head_s_next_session(checkpoint: Path) -> None:
    with stage_hosts(checkpoint, SPLITS, cache=TIGHT, stall_s=2.0) as (head, second):
        reference = serve(head, requests(100, 2))
        assert head.driver is not None and second.assignment is not None
        batch = requests(200, 2)
        head.driver.submit(batch)
        wait_until(running(head, 2, 30))
        assignment = second.assignment
        second.stop()
        second.follow(assignment)  # the next stage restarted: it knows none of the requests in flight
        done = head.driver.wait_for([r for r, _, _ in batch], idle_timeout_s=LIVENESS_S)
        assert [done[r] for r, _, _ in batch] == reference
        assert head.worker is not None and head.worker.head is not None and head.worker.head.restarts >= 1


def test_a_newer_plan_s_first_steps_wait_for_the_stage_to_follow_it(checkpoint: Path) -> None:
    with stage_hosts(checkpoint, SPLITS, secured=True) as (head, second):
        reference = serve(head, requests(100, 2))
        assert head.assignment is not None and second.assignment is not None
        newer = [replace(a, version=a.version + 1) for a in (head.assignment, second.assignment)]
        head.follow(newer[0])  # the head follows the new plan first, with the same peers and keys
        assert head.driver is not None and second.worker is not None
        batch = requests(200, 2)
        head.driver.submit(batch)
        old_stage = second.worker
        wait_until(lambda: old_stage.inbox.held > 0)  # the new plan's first step waits at the old stage
        second.follow(newer[1])
        done = head.driver.wait_for([r for r, _, _ in batch], idle_timeout_s=LIVENESS_S)
        assert [done[r] for r, _, _ in batch] == reference
        assert head.worker is not None and head.worker.head is not None and head.worker.head.restarts == 0
        assert not set(old_stage.ledger.records) & {r for r, _, _ in batch}  # the old plan's stage took none
