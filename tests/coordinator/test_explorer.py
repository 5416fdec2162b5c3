"""The explorer's parts on their own: its view models (pure), its cache, its id checks, its templates'
escaping, and its routes on the real app (real Redis and SQLite, no chain): read-only, bounded, strict
headers, a 404 page for anything unknown, and a batch's page without any of its content. The whole explorer
over a running market, in a browser, is tests/e2e/test_explorer.py."""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from coordinator.db.models import Batch, File, FileContent, Miner, PipelineRecord, Result, WorkUnit
from coordinator.db.session import Database
from coordinator.explorer import views
from coordinator.explorer.cache import Fresh
from coordinator.explorer.logs import LOG_SPAN, MAX_SPANS, Forward, Newest
from coordinator.explorer.reads import batch_id, chain_id
from coordinator.explorer.routes import HEADERS, templates
from coordinator.services.errors import NotFound
from coordinator.services.ids import new_id
from coordinator.services.live import Heartbeat
from tests.coordinator.conftest import MODEL_NAME, ApiServer

A, B = "0x" + "a" * 40, "0x" + "b" * 40
NOW = 1_800_000_000


def miner(address: str, region: str = "eu-west", **fields: object) -> Miner:
    values: dict[str, object] = {
        "address": address,
        "model": MODEL_NAME,
        "endpoint": "tcp://127.0.0.1:5555",
        "region": region,
        "gpu": "cpu",
        "memory_gb": 1.0,
        "tflops": 1.0,
        "mem_bandwidth_gb_s": 1.0,
        "layer_latency_ms": 2.0,
        "joined_at": NOW,
        "reachable": True,
    }
    return Miner(**(values | fields))


def pipeline(pid: int, *stages: tuple[str, int, int]) -> PipelineRecord:
    return PipelineRecord(
        id=pid,
        model=MODEL_NAME,
        version=1,
        stages=[{"miner": m, "start": s, "end": e} for m, s, e in stages],
        members=[m for m, _, _ in stages],
        active=True,
        microbatches=2,
        created_at=NOW,
    )


def test_throughput_is_the_tokens_of_each_of_the_last_minutes_oldest_first() -> None:
    minute = NOW // 60
    served = {minute: 7, minute - 2: 5, minute - 30: 99, minute + 1: 1}  # the last two: outside the span
    assert views.throughput(served, NOW, minutes=4) == [0, 5, 0, 7]
    assert views.bar_heights([0, 5, 0, 10]) == ([0.0, 50.0, 0.0, 100.0], 10)
    assert views.bar_heights([0, 0]) == ([0.0, 0.0], 0)


def test_the_plan_is_drawn_as_layer_ranges_and_step_times_follow_the_layers_held() -> None:
    plan = [pipeline(3, (A, 0, 6), (B, 6, 24))]
    (row,) = views.pipeline_rows(plan, {A: 0, B: 1})
    assert (row.layers, row.microbatches) == (24, 2)
    assert [(s.miner, s.x, s.width, s.colour) for s in row.stages] == [(A, 0.0, 25.0, 0), (B, 25.0, 75.0, 1)]
    assert views.layers_held(plan) == {A: 6, B: 18}
    inputs = views.MinerInputs(
        [miner(A), miner(B, "us-east")], {A: Heartbeat(layer_latency_ms=1.5)}, {}, plan
    )
    page = views.market_page([(MODEL_NAME, b"\x01" * 32)], inputs, False, {}, {"completed": 3}, None, NOW)
    assert page.regions == [("eu-west", [A]), ("us-east", [B])]
    assert page.figures[f"miner.{A}.step"].text == "9.0 ms (6 layers)"  # its beat's 1.5 ms a layer
    assert page.figures[f"miner.{B}.step"].text == "36.0 ms (18 layers)"  # its profile's 2 ms: no beat
    assert page.figures[f"miner.{A}.state"].text == "serving"
    assert page.figures[f"miner.{B}.state"].text == "offline"
    assert page.figures[f"pipeline.3.{B}"].text == "0xbbbb…bbbb L6-23"
    assert page.figures["batches.completed"].text == "3" and page.figures["batches.failed"].text == "0"
    assert page.models == [(MODEL_NAME, "0x" + "01" * 32)]


def test_a_miner_s_state_says_how_its_peers_reach_it() -> None:
    assert views.miner_state(True, False, miner(A)) == "joined"
    assert views.miner_state(True, True, miner(A, relay_endpoint="tcp://r:1")) == "serving, behind a relay"
    assert views.miner_state(True, False, miner(A, reachable=False)) == "joined, unreachable"


def test_a_batch_s_stage_says_what_it_waits_for() -> None:
    def stage(
        units: dict[str, int] | None = None, accepted: int = 0, signed: int = 0, **fields: object
    ) -> str:
        batch = Batch(id="batch_x", request_total=4, completed_count=0, failed_count=0, **fields)
        return views.batch_stage(views.BatchInputs(batch, (0, 0), units or {}, accepted, signed))

    assert stage(status="validating").startswith("validating: the task is checked on-chain")
    assert stage(status="validating", proposal={"miners": [A, B]}, accepted=1) == (
        "validating: 1 of 2 miners accepted the stake lock"
    )
    assert stage({"done": 1, "leased": 2, "queued": 1}, status="in_progress") == (
        "in progress: 1 of 4 work units done, 2 being served"
    )
    assert (
        stage(status="finalizing", miners=[A, B], signed=1) == "finalizing: 1 of 2 miners signed the results"
    )
    assert stage(status="completed", commitment={}, finalized=False) == (
        "completed: results committed, in the challenge window, then settled on-chain"
    )
    assert stage(status="expired") == "expired"


def test_the_cache_keeps_values_for_their_time_and_only_so_many() -> None:
    clock = [0.0]
    cache: Fresh[str, int] = Fresh(size=2, ttl_s=2.0, clock=lambda: clock[0])
    made: list[str] = []

    def make(key: str, value: int) -> int:
        def made_now() -> int:
            made.append(key)
            return value

        return cache.get(key, made_now)

    assert (make("a", 1), make("a", 2)) == (1, 1)
    clock[0] = 2.5
    assert make("a", 3) == 3  # stale: made again
    make("b", 4)
    make("c", 5)  # "a" is the least recently used of three: it leaves
    assert make("a", 6) == 6 and made == ["a", "a", "b", "c", "a"]


def test_a_value_is_kept_for_its_time_from_when_it_was_made() -> None:
    clock = [0.0]
    cache: Fresh[str, int] = Fresh(size=2, ttl_s=2.0, clock=lambda: clock[0])

    def slow() -> int:
        clock[0] += 5.0  # its reads took longer than the ttl
        return 1

    assert cache.get("a", slow) == 1
    clock[0] += 1.0
    assert cache.get("a", lambda: 2) == 1


def test_one_thread_makes_a_key_while_the_others_wait_for_its_value() -> None:
    cache: Fresh[str, int] = Fresh(size=2, ttl_s=60.0)
    started, release, made = threading.Event(), threading.Event(), []

    def make() -> int:
        made.append(1)
        started.set()
        release.wait(10)
        return 7

    with ThreadPoolExecutor(4) as pool:
        first = pool.submit(cache.get, "a", make)
        assert started.wait(10)
        others = [pool.submit(cache.get, "a", make) for _ in range(3)]
        release.set()
        assert [f.result(10) for f in (first, *others)] == [7, 7, 7, 7]
    assert made == [1]


def test_a_make_that_fails_keeps_nothing_and_the_next_caller_makes_it() -> None:
    cache: Fresh[str, int] = Fresh(size=2, ttl_s=60.0)

    def broken() -> int:
        raise OSError("the chain is down")

    with pytest.raises(OSError):
        cache.get("a", broken)
    assert cache.get("a", lambda: 3) == 3


@pytest.mark.parametrize("text", ["0", "-1", "1e3", "01x", "01", "0005", "9" * 19, "9" * 400, "٣", " 1", "6"])
def test_a_chain_id_is_a_decimal_up_to_the_chain_s_count(text: str) -> None:
    with pytest.raises(NotFound):
        chain_id("task", text, known=lambda: 5)


def test_ids_that_are_ids_pass() -> None:
    assert chain_id("task", "5", known=lambda: 5) == 5
    good = new_id("batch_")
    assert batch_id(good) == good
    for bad in ("batch-1234", good + "0", good.upper(), "<script>", "batch_" + "g" * 24):
        with pytest.raises(NotFound):
            batch_id(bad)


def test_miner_supplied_strings_render_escaped() -> None:
    hostile = '"><script>alert(1)</script><img src=x onerror=alert(2)>'
    inputs = views.MinerInputs([miner(A, hostile, endpoint=hostile, gpu=hostile)], {}, {}, [])
    page = views.market_page([(hostile, b"\x02" * 32)], inputs, False, {}, {}, None, NOW)
    html = templates.get_template("market.html").render(page=page, refresh_ms=3000)
    assert "<script>alert" not in html and "<img src=x" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def stored(database: Database) -> tuple[str, list[str]]:
    """A served batch stored as the coordinator stores one, with its content; returns its id and the strings
    its content is made of."""
    now = int(time.time())
    secrets = ["who-asked-0", "a prompt nobody else may read", "an answer nobody else may read"]
    line = {"custom_id": secrets[0], "body": {"messages": [{"role": "user", "content": secrets[1]}]}}
    with database.session() as session:
        file = File(
            id=new_id("file-"), owner=A, purpose="batch", filename="secret-name.jsonl", bytes=10,
            created_at=now, line_count=1,
        )  # fmt: skip
        session.add(file)
        session.flush()
        session.add(FileContent(file_id=file.id, data=json.dumps(line).encode()))
        batch = Batch(
            id=new_id("batch_"), owner=A, input_file_id=file.id, endpoint="/v1/chat/completions",
            model=MODEL_NAME, completion_window="24h", task_id=7, status="in_progress", created_at=now,
            expires_at=now + 86_400, request_total=1, completed_count=1, metadata_={"note": "private-meta"},
        )  # fmt: skip
        session.add(batch)
        session.add(PipelineRecord(id=1, model=MODEL_NAME, version=1, stages=[], members=[], active=False,
                                   created_at=now))  # fmt: skip
        session.flush()
        session.add(WorkUnit(batch_id=batch.id, line_indices=[0], pipeline_id=1, status="done", attempts=1,
                             created_at=now))  # fmt: skip
        session.add(Result(
            batch_id=batch.id, line_index=0, custom_id=secrets[0], ok=True, body=json.dumps(secrets[2]),
            output_hash="0x" + "00" * 32, input_tokens=11, output_tokens=13, pipeline=[A], created_at=now,
        ))  # fmt: skip
        return batch.id, [*secrets, file.id, "secret-name", "private-meta"]


def test_the_routes_read_only_strict_headers_no_content(chainless_api: ApiServer) -> None:
    database = chainless_api.app.state.database
    batch, secrets = stored(database)
    base = chainless_api.url
    for path in (
        f"/explorer/batches/{batch}",
        f"/explorer/api/batches/{batch}",
        "/explorer",
        "/explorer/api/market",
    ):
        answer = httpx.get(base + path)
        assert answer.status_code == 200, path
        assert {k: answer.headers[k] for k in HEADERS} == HEADERS
        assert [s for s in secrets if s in answer.text] == [], path
    figures = httpx.get(f"{base}/explorer/api/batches/{batch}").json()["figures"]
    assert (figures["batch.completed"]["text"], figures["batch.output_tokens"]["text"]) == ("1", "13")
    assert httpx.get(f"{base}/explorer/api/market").json()["figures"]["throughput.span"]["text"] == "13"
    for path in ("/explorer/batches/batch-1", "/explorer/batches/" + "x" * 5000, "/explorer/nothing/here"):
        missing = httpx.get(base + path)
        assert (missing.status_code, missing.headers["content-type"]) == (404, "text/html; charset=utf-8")
        assert missing.headers["content-security-policy"] == HEADERS["Content-Security-Policy"]
    unreadable = httpx.get(f"{base}/explorer/tasks/1")  # this API has no chain: a page that says so
    assert unreadable.status_code == 503 and "not connected to a chain" in unreadable.text
    assert httpx.get(f"{base}/explorer/api/disputes").status_code == 503
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        assert httpx.request(method, f"{base}/explorer/api/batches/{batch}").status_code == 405
    assert (
        httpx.get(f"{base}/explorer/find", params={"q": batch}, follow_redirects=False).headers["location"]
        == f"/explorer/batches/{batch}"
    )
    assert not any(path.startswith("/explorer") for path in httpx.get(f"{base}/openapi.json").json()["paths"])


def test_events_are_read_forward_in_spans_never_twice() -> None:
    asked: list[tuple[int, int]] = []
    events = {12_000: "a", 30_000: "b", 52_000: "c"}  # block -> event

    def fetch(start: int, end: int) -> list[str]:
        asked.append((start, end))
        return [e for block, e in sorted(events.items()) if start <= block <= end]

    verifiers = Forward(100, fetch, keep=2)
    assert verifiers.read(60_000) == ["a", "b"]  # eight spans of LOG_SPAN blocks: up to 40,099
    assert asked == [(100 + i * LOG_SPAN, 99 + (i + 1) * LOG_SPAN) for i in range(MAX_SPANS)]
    asked.clear()
    assert verifiers.read(60_000) == ["b", "c"]  # on from 40,100, the oldest leaves
    assert asked[0] == (40_100, 45_099) and asked[-1] == (55_100, 60_000)
    asked.clear()
    assert verifiers.read(60_000) == ["b", "c"] and asked == []  # nothing new: no call


def test_a_search_for_one_event_stops_at_it_and_reads_the_head_again_until_then() -> None:
    logged: dict[int, str] = {}
    asked: list[tuple[int, int]] = []

    def fetch(start: int, end: int) -> list[str]:
        asked.append((start, end))
        return [e for block, e in logged.items() if start <= block <= end]

    resolution = Forward(1_000, fetch, keep=1, once=True)
    assert resolution.read(1_010) == []  # the state says resolved, the node's logs lag
    logged[1_005] = "resolved"
    assert resolution.read(1_012) == ["resolved"] and asked == [(1_000, 1_010), (1_000, 1_012)]
    assert resolution.read(9_000) == ["resolved"] and len(asked) == 2  # found: never read again


def test_a_failed_span_is_read_again() -> None:
    calls = [0]

    def flaky(start: int, end: int) -> list[int]:
        calls[0] += 1
        if calls[0] == 1:
            raise OSError("the node is down")
        return [start]

    log = Forward(7, flaky, keep=4)
    with pytest.raises(OSError):
        log.read(10)
    assert log.read(10) == [7]


def test_the_newest_events_are_found_backward_from_the_head_then_forward() -> None:
    asked: list[tuple[int, int]] = []
    events = {12_000: "a", 30_000: "b", 52_000: "c"}

    def fetch(start: int, end: int) -> list[str]:
        asked.append((start, end))
        return [e for block, e in sorted(events.items()) if start <= block <= end]

    verifiers = Newest(100, fetch, keep=2)
    assert verifiers.read(60_000) == ["b", "c"]  # the two newest, not the two oldest
    assert asked == [(60_001 - (i + 1) * LOG_SPAN, 60_000 - i * LOG_SPAN) for i in range(7)]
    asked.clear()
    events[61_000] = "d"
    assert verifiers.read(62_000) == ["c", "d"] and asked == [(60_001, 62_000)]
    asked.clear()
    assert verifiers.read(62_000) == ["c", "d"] and asked == []


def test_a_short_chain_is_read_backward_to_its_start_and_no_further() -> None:
    asked: list[tuple[int, int]] = []

    def fetch(start: int, end: int) -> list[int]:
        asked.append((start, end))
        return [start] if start == 7 else []

    log = Newest(7, fetch, keep=5)
    assert log.read(6_000) == [7]
    assert asked == [(1_001, 6_000), (7, 1_000)]
    assert log.read(6_000) == [7] and len(asked) == 2
