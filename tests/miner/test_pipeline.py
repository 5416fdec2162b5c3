"""The multi-process pipeline: one OS process per stage over ZeroMQ on localhost.

Greedy output equals Hugging Face transformers token for token for two families, 1, 2 and 4-stage splits,
with and without offloading and with a page pool too small for every sequence; seeded sampling equals the
in-process Engine's across runs and splits; every stage records the prompt and output of every request it
served; malformed messages are dropped by live stages; every process exits.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import msgpack
import pytest
import torch
import zmq

from client_sdk.protocol.sampling import SamplingParams
from miner.engine.engine import Engine
from miner.model.shard import StageShard
from miner.pipeline.processes import StageProcesses, even_split
from miner.pipeline.stage import CacheSettings
from miner.transport.frames import encode, message
from tests.miner.checkpoints import build_checkpoint, hf_greedy

PROMPTS = [[3, 14, 15, 92, 65, 35], [8, 9], [27, 18, 28, 18, 28, 45, 90, 45, 23, 53, 60], [11] * 19, [50, 40]]
NEW_TOKENS = [13, 4, 9, 17, 1]  # they finish at different steps, so slots free up mid-batch
GREEDY = [SamplingParams(max_tokens=n) for n in NEW_TOKENS]
# pages of 4 tokens; 5-token steps chunk every prefill; the longest request needs 9 pages
PLAIN = CacheSettings(page_size=4, local_pages=40, num_microbatches=2, max_seqs=4, token_budget=5)
# 3 pages per microbatch stay on the device, 6 more are swapped through host memory between its turns
OFFLOADED = CacheSettings(page_size=4, local_pages=3, global_pages=6, num_microbatches=3, token_budget=8)


@pytest.fixture(scope="module", params=["llama", "qwen3"])
def checkpoint(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_checkpoint(request.param, tmp_path_factory.mktemp(request.param))


@pytest.fixture(scope="module")
def expected(checkpoint: Path) -> list[list[int]]:
    outputs = hf_greedy(checkpoint, PROMPTS, NEW_TOKENS)
    assert len({tuple(o[:4]) for o in outputs}) > 2, "degenerate checkpoint: prompts give the same output"
    return outputs


def requests(params: list[SamplingParams], first_id: int = 0) -> list[tuple[int, list[int], SamplingParams]]:
    return [(first_id + i, p, sp) for i, (p, sp) in enumerate(zip(PROMPTS, params, strict=True))]


def run(
    checkpoint: Path, stages: int, cache: CacheSettings, params: list[SamplingParams], secured: bool = False
) -> tuple[list[list[int]], list[dict[str, Any]]]:
    pipeline = StageProcesses(checkpoint, even_split(4, stages), cache, secured=secured)
    with pipeline:
        outputs = pipeline.run(requests(params))
    assert pipeline.exitcodes == [0] * stages
    assert sorted(outputs) == list(range(len(PROMPTS)))
    return [list(outputs[i]) for i in range(len(PROMPTS))], pipeline.reports


def assert_every_stage_recorded(reports: list[dict[str, Any]], outputs: list[list[int]]) -> None:
    for report in reports:
        records = {
            request_id: (prompt_len, tokens, done)
            for request_id, prompt_len, tokens, done in report["records"]
        }
        assert records == {
            i: (len(p), p + o, True) for i, (p, o) in enumerate(zip(PROMPTS, outputs, strict=True))
        }
        assert report["dropped"] == 0


@pytest.mark.parametrize("stages", [1, 2, 4])
@pytest.mark.parametrize("cache", [PLAIN, OFFLOADED], ids=["plain", "offloaded"])
def test_greedy_matches_transformers(
    checkpoint: Path, expected: list[list[int]], stages: int, cache: CacheSettings
) -> None:
    outputs, reports = run(checkpoint, stages, cache, GREEDY)
    assert outputs == expected
    assert_every_stage_recorded(reports, expected)
    assert [(r["start"], r["end"]) for r in reports] == even_split(4, stages)
    assert all((r["bytes_swapped"] > 0) == (cache is OFFLOADED) for r in reports)


def test_secured_links_serve_exactly_the_same(checkpoint: Path, expected: list[list[int]]) -> None:
    """The same 4-stage pipeline over CURVE links: same tokens, every stage recorded them, nothing dropped,
    and the shutdown still travels down the pipeline (every stage reports)."""
    outputs, reports = run(checkpoint, 4, PLAIN, GREEDY, secured=True)
    assert outputs == expected
    assert len(reports) == 4
    assert_every_stage_recorded(reports, expected)


def test_small_page_pool_preempts_and_still_matches(checkpoint: Path, expected: list[list[int]]) -> None:
    """10 pages of 4 tokens: sequences wait, get preempted and are re-prefilled from their token ids on every
    stage, and the output is still exact."""
    cache = CacheSettings(page_size=4, local_pages=10, num_microbatches=1, max_seqs=5, token_budget=64)
    outputs, reports = run(checkpoint, 2, cache, GREEDY)
    assert outputs == expected
    assert reports[0]["preemptions"] > 0
    assert_every_stage_recorded(reports, expected)


def test_seeded_sampling_matches_the_engine_across_runs_and_splits(checkpoint: Path) -> None:
    params = [
        SamplingParams(max_tokens=10, temperature=0.8, top_p=0.9, seed=seed) for seed in range(len(PROMPTS))
    ]
    cache = CacheSettings(page_size=4, local_pages=64, num_microbatches=2)
    engine = Engine([StageShard.load(checkpoint, 0, 4)], page_size=4, local_pages=64, num_microbatches=2)
    reference = engine.generate(PROMPTS, params)
    assert reference != engine.generate(PROMPTS, [SamplingParams(max_tokens=10)] * len(PROMPTS))
    assert run(checkpoint, 2, cache, params)[0] == reference
    with StageProcesses(checkpoint, even_split(4, 4), cache) as pipeline:
        first = pipeline.run(requests(params))
        again = pipeline.run(requests(params, first_id=len(PROMPTS)))  # same seeds, new ids
    assert [list(first[i]) for i in range(len(PROMPTS))] == reference
    assert [list(again[len(PROMPTS) + i]) for i in range(len(PROMPTS))] == reference


def test_live_stages_drop_malformed_messages_and_keep_serving(
    checkpoint: Path, expected: list[list[int]]
) -> None:
    hidden = 64
    bad_for_second = [
        [b"\x93garbage", b"1234"],  # not a header map
        [b"only one frame"],
        [b"\x00" * (4 * 1024 * 1024 + 1), b""],  # header over the size limit
        # well-formed, but request 99 was never introduced by the first stage
        encode(*message("activations", request_ids=(99,), token_ids=(1,), tensor=torch.zeros(1, hidden))),
        # hidden states of the wrong width for this model
        encode(*message("activations", token_ids=(), tensor=torch.zeros(0, hidden + 1))),
    ]
    bad_for_first = [
        encode(
            *message("activations", token_ids=(), tensor=torch.zeros(0, hidden))
        ),  # the head never gets these
        # not of the head's session (and no microbatch waits for them): dropped as stale
        encode(*message("tokens", request_ids=(99,), token_ids=(5,))),
        [msgpack.packb({"v": 3}), b""],
    ]
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    pipeline = StageProcesses(checkpoint, even_split(4, 2), PLAIN)
    try:
        with pipeline:
            for endpoint, junk in zip(pipeline.endpoints, (bad_for_first, bad_for_second), strict=True):
                peer = context.socket(zmq.PUSH)
                peer.connect(endpoint)
                for frames in junk:
                    peer.send_multipart(frames)
                peer.close(linger=5_000)
            outputs = pipeline.run(requests(GREEDY))
    finally:
        context.term()
    assert [list(outputs[i]) for i in range(len(PROMPTS))] == expected
    # each bad message is dropped; one of session (0, 0) that reaches a stage after the head's first step is
    # counted as stale instead (the junk races the pipeline's own traffic)
    assert [r["dropped"] + r["stale"] for r in pipeline.reports] == [len(bad_for_first), len(bad_for_second)]
    assert pipeline.reports[0]["stale"] >= 1  # the tokens of no session of the head's
    assert pipeline.exitcodes == [0, 0]


DRIVER = """
import json, sys, time
from pathlib import Path
from miner.pipeline.processes import StageProcesses, even_split
if __name__ == "__main__":
    pipeline = StageProcesses(Path(sys.argv[1]), even_split(4, 2))
    pipeline.start()
    print(json.dumps(pipeline.pids), flush=True)
    time.sleep(120)
"""


def running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"  # a zombie has exited; only its parent's bookkeeping is left


def test_stages_exit_when_the_driver_is_killed(tmp_path: Path) -> None:
    checkpoint = build_checkpoint("qwen2", tmp_path / "model")
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    driver = subprocess.Popen([sys.executable, str(script), str(checkpoint)], stdout=subprocess.PIPE, env=env)
    try:
        assert driver.stdout is not None
        pids = json.loads(driver.stdout.readline())
        assert all(running(pid) for pid in pids)
        driver.send_signal(signal.SIGKILL)
        driver.wait(timeout=10)
        deadline = time.monotonic() + 30
        while any(running(pid) for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(running(pid) for pid in pids), "stage processes outlived their driver"
    finally:
        driver.kill()
        driver.wait()
