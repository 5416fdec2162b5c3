"""A new plan's head may start sending before its next stage has followed the plan: what it sent then waits
at that stage's inbox (one inbox for all of a node's assignments) and is served once the node follows, so
the unit completes as on a settled pipeline instead of stalling until the head's idle timeout (120 s)."""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from miner.node.executor import HeadExecutor, Served
from miner.node.stage_host import HostSettings, StageHost
from miner.tiny_checkpoint import build_tiny_model
from miner.transport.security import LinkKeys
from tests.miner.nodes import CACHE, assignments, endpoints, ignore, reader_for
from tests.miner.test_node import TASK, unit_lines

LIVENESS_S = 60  # far above the few seconds the unit takes; below the head's 120 s idle timeout


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("replan-model"))


def test_a_head_that_starts_before_its_next_stage_follows_the_plan_loses_nothing(checkpoint: Path) -> None:
    reader = reader_for(checkpoint)
    where = endpoints(3)  # old head, the second stage, new head
    keys = [LinkKeys.generate() for _ in where]
    hosts = [
        StageHost(HostSettings(checkpoint, e, CACHE, link_keys=k), ignore)
        for e, k in zip(where, keys, strict=True)
    ]
    old_head, second, new_head = hosts
    public = tuple(k.public for k in keys)
    try:
        first_plan = assignments([(0, 2), (2, 4)], (where[0], where[1]), (public[0], public[1]))
        old_head.follow(first_plan[0])
        second.follow(first_plan[1])
        assert old_head.driver is not None
        settled = dict(HeadExecutor(reader).run(TASK, unit_lines(6), old_head.driver))

        # plan 2: the new head takes the first layers; the second stage has not followed it yet
        second_plan = [
            replace(a, pipeline_id=2, version=2)
            for a in assignments([(0, 2), (2, 4)], (where[2], where[1]), (public[2], public[1]))
        ]
        old_head.follow(None)
        new_head.follow(second_plan[0])
        assert new_head.driver is not None
        outcome: dict[str, Any] = {}

        def serve() -> None:
            try:
                assert new_head.driver is not None
                outcome["served"] = dict(HeadExecutor(reader).run(TASK, unit_lines(6), new_head.driver))
            except Exception as exc:
                outcome["error"] = exc

        unit = threading.Thread(target=serve, daemon=True)
        unit.start()
        threading.Event().wait(1.0)  # its first messages reach the second stage, which does not take them yet
        assert second.worker is not None and second.worker.inbox.rejected == 0
        second.follow(second_plan[1])
        unit.join(LIVENESS_S)
        assert not unit.is_alive(), "the unit stalled: what the new head sent first was lost"
        served: dict[int, Served] = outcome["served"]
        assert served == settled
    finally:
        for host in hosts:
            host.close()
