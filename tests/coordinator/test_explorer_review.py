"""Security review of the market explorer (coordinator/explorer), attacked cold as a stranger, a miner and a
slow RPC node. Each test names the property that should hold; each failed on cd5fb18 (the code as reviewed:
"then" below) and passes since 35c665e, which fixed what it shows.

Attacks tried, and what came of them:

Worked on cd5fb18 (each fixed since; its test below failed there):
- Request-slot exhaustion: Explorer.page takes one of the API's 32 database request slots *before* it waits
  for one of the explorer's 2 read threads, so every queued visitor holds a slot. 32 concurrent explorer
  requests over a slow RPC node starve every DbSession route (users' batches, miners' routes) until they
  drain. `test_explorer_visitors_waiting_for_its_threads_hold_none_of_the_api_s_request_slots`
- Cache defeated by a slow chain: Fresh stamps a value with the time its make() *started*; a page whose reads
  take longer than PAGE_TTL_S (2 s) is stale the moment it is stored, so every request reads the chain again,
  exactly when the RPC node is struggling. `test_a_page_slower_than_its_ttl_is_still_read_once_per_ttl`
- Cache busting by aliases: chain_id accepts leading zeros ("1", "01", ... 19 digits) and the page cache is
  keyed by the raw path text, so one task's (or dispute's) page has 19 spellings, each a cache miss costing
  its calls (~25 measured here: 18 aliases, 456 calls), on a chain with a single task.
  `test_a_task_id_has_one_spelling_so_its_page_is_read_once_per_ttl`
- Full table scan every 2 s: the market page counts the last day's batches with `WHERE created_at >= ?`,
  but no index leads with created_at (only (owner, created_at)): SQLite walks all of ix_batches_status,
  every batch ever stored, once per PAGE_TTL_S (more often once reads outlast it, see above).
  `test_the_market_page_reads_no_table_in_full`
- Unknown static file: /explorer/static/<anything> answers the API's JSON 404, not the explorer's 404 page
  (the docs: anything unknown is a 404 page). `test_an_unknown_static_file_is_the_explorer_s_404_page`

Held (no test: the defence worked):
- Content leaks: no page or JSON twin of a batch shows a prompt, output, custom_id, file id, file name,
  metadata or the batch's `errors`; `status_detail` ("why it waits") carries only counts, miner addresses
  and model names; the owner's routes still answer 401 unsigned. Batch ids are 96 random bits
  (secrets.token_hex(12)) and are listed nowhere (market, task, dispute pages); a batch page does name its
  task, so whoever learns a batch id learns the owner's wallet (on-chain task owner): by design, noted.
- XSS: every template is autoescaped, attributes are quoted, live.js uses textContent/setAttribute("title")
  only (no innerHTML) and CSS.escape for selectors; hrefs are built from integers and validated batch ids
  only; the CSP and the other headers are on pages, twins, static files, 404/405/503 answers.
- Write paths: POST/PUT/PATCH/DELETE/OPTIONS/TRACE are 405 everywhere; /explorer/find redirects only to
  /explorer/batches/<validated id> or /explorer/tasks/<int>: no open redirect (repeated, NUL, RLO, 64-digit
  q tried). HEAD is a 405 too (harmless, but not the GET/HEAD the brief assumed).
- Bad input: 5000-char, %FF, NUL, unicode digits, negative, past-the-count ids are 404 pages (or 503 without
  a chain), never a 500. The 404 page reflects up to 40 characters of the path, escaped (text spoofing on
  the coordinator's origin at most).
- Memory: every cache is bounded (256 pages, 256 resolutions, 1 symbol, 1 count pair).
- Cross-visitor leaks through the cache: pages hold nothing per visitor; errors (404/503) are not cached.
Not shown by a test (needs a node that lies or lags): Explorer.resolutions keeps a resolved dispute's
`resolution_of` for ever, None included, so a lagging or load-balanced RPC node that answers getDispute
(resolved) but not yet the DisputeResolved log makes that dispute's money figures a dash for the process's
life; and the disputes page and resolution_of run eth_getLogs from the deployment block to latest on each
build (unbounded range as the chain grows; many providers reject it, then the page is a 503 for good).
"""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from eth_account.signers.local import LocalAccount
from sqlalchemy import event

from client_sdk.chain.anvil import Anvil, free_port
from client_sdk.chain.contracts import Market
from client_sdk.chain.deployment import Deployment
from client_sdk.chain.rpc import open_rpc
from coordinator.chain import CoordinatorChain
from coordinator.config import ServedModel, Settings
from coordinator.db.migrate import upgrade
from coordinator.explorer.reads import PAGE_TTL_S
from coordinator.explorer.routes import HEADERS
from tests.coordinator.conftest import ALICE, ApiServer
from tests.coordinator.test_explorer import stored
from tests.helpers import DemoConfig, demo_task_for


class SlowNode:
    """A JSON-RPC pass-through to anvil that waits `delay_s` before each call and counts them: the operator's
    RPC node on a bad day (real anvil behind it; nothing of the project is replaced)."""

    def __init__(self, upstream: str) -> None:
        self.upstream, self.delay_s, self.calls = upstream, 0.0, 0
        self.lock = threading.Lock()
        self.client = httpx.Client(timeout=60)
        node = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                with node.lock:
                    node.calls += 1
                time.sleep(node.delay_s)
                answer = node.client.post(
                    node.upstream, content=body, headers={"content-type": "application/json"}
                )
                self.send_response(answer.status_code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer.content)))
                self.end_headers()
                self.wfile.write(answer.content)

            def log_message(self, *_args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> SlowNode:
        self.thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.client.close()

    def count(self) -> int:
        with self.lock:
            return self.calls


@pytest.fixture
def sqlite_settings(tmp_path: Path, redis_url: str, served_model: ServedModel) -> Settings:
    url = f"sqlite:///{tmp_path / 'review.db'}"
    upgrade(url)
    return Settings(database_url=url, redis_url=redis_url, models=(served_model,))


@pytest.fixture
def slow(
    chain: Anvil,
    admin_market: Market,
    deployment: Deployment,
    accounts: list[LocalAccount],
    sqlite_settings: Settings,
) -> Iterator[tuple[ApiServer, SlowNode]]:
    """The real API whose chain is read through a SlowNode (no delay until a test sets one)."""
    with SlowNode(chain.rpc_url) as node:
        w3, _ = open_rpc(node.url)
        with ApiServer(sqlite_settings, CoordinatorChain(Market(w3, deployment, accounts[0]))) as server:
            yield server, node
            node.delay_s = 0.0


def one_task(admin_market: Market, user: LocalAccount) -> int:
    config = DemoConfig()
    admin_market.token.mint(user.address, config.max_price)
    mine = admin_market.as_account(user)
    mine.token.approve(mine.escrow.address, config.max_price)
    return demo_task_for(mine, "review", admin_market.chain_time() + 86_400)


def test_explorer_visitors_waiting_for_its_threads_hold_none_of_the_api_s_request_slots(
    slow: tuple[ApiServer, SlowNode],
) -> None:
    """A stranger opens 40 explorer pages at once while the RPC node is slow: the owner's signed read of its
    own batches (a DbSession route, no chain read) must still answer at once. Then each queued explorer
    request sits in one of the 32 request slots (coordinator/explorer/reads.py, Explorer.page: `async with
    self.database.request_slots` around the wait for `self.limiter`), so the owner's request waits behind
    them (fix: wait for the limiter first and take a slot only inside it, or take none: the explorer's two
    threads open their own sessions)."""
    server, node = slow
    assert httpx.get(server.url + "/explorer/api/market", timeout=30).status_code == 200
    time.sleep(PAGE_TTL_S + 0.2)  # the kept page is stale: the next visitors read the chain
    node.delay_s = 0.5  # the market page's ~10 calls: ~5 s a read
    slots = server.app.state.database.request_slots
    owner = server.client(ALICE)
    with ThreadPoolExecutor(40) as pool:
        visits = [pool.submit(httpx.get, server.url + "/explorer/api/market", timeout=120) for _ in range(40)]
        time.sleep(0.5)  # they are all in: two reading, the others queued for the explorer's threads
        held = slots.borrowed_tokens
        try:
            started = time.monotonic()
            try:
                answer = owner.get("/v1/batches", timeout=3)
                waited, status = time.monotonic() - started, answer.status_code
            except httpx.TimeoutException:
                waited, status = time.monotonic() - started, None
        finally:
            node.delay_s = 0.0  # let the queue drain fast
        for visit in visits:
            visit.result()
    assert status == 200 and waited < 2, (
        f"the owner's read waited {waited:.1f} s ({status}): explorer visitors held {held} of "
        f"{slots.total_tokens} request slots"
    )


def test_a_page_slower_than_its_ttl_is_still_read_once_per_ttl(slow: tuple[ApiServer, SlowNode]) -> None:
    """The market page read twice in a row while its chain reads take longer than PAGE_TTL_S: the second must
    be the kept page. Then coordinator/explorer/cache.py Fresh.get stamps a value with `now` taken before
    make() ran, so a page that took longer than its TTL to read is stored already stale and every request
    reads the chain again (fix: stamp with the clock after make(), and/or let one make() per key run at once
    while the others wait for it)."""
    server, node = slow
    node.delay_s = 0.3  # the market page makes ~10 calls here: ~3 s > PAGE_TTL_S
    first = httpx.get(server.url + "/explorer/api/market", timeout=60)
    assert first.status_code == 200
    before = node.count()
    second = httpx.get(server.url + "/explorer/api/market", timeout=60)
    assert second.status_code == 200
    assert node.count() - before == 0, (
        f"the page read again {node.count() - before} times (ttl {PAGE_TTL_S} s)"
    )


def test_a_task_id_has_one_spelling_so_its_page_is_read_once_per_ttl(
    slow: tuple[ApiServer, SlowNode], admin_market: Market, accounts: list[LocalAccount]
) -> None:
    """One task, its page asked for under every spelling chain_id accepts ("1", "01", ... 19 digits) within
    its TTL: only the first may read the chain. Then coordinator/explorer/reads.py chain_id accepts leading
    zeros and Explorer.page keys the cache by the raw text, so each spelling is a miss costing the task page's
    calls (fix: key the cache by int(text), or make "01" a 404 / a redirect to the canonical id)."""
    server, node = slow
    task_id = one_task(admin_market, accounts[2])
    assert httpx.get(f"{server.url}/explorer/api/tasks/{task_id}", timeout=30).status_code == 200
    before = node.count()
    assert httpx.get(f"{server.url}/explorer/api/tasks/{task_id}", timeout=30).status_code == 200
    assert node.count() == before  # the control: the same spelling again is the kept page
    spellings = [str(task_id).rjust(width, "0") for width in range(len(str(task_id)) + 1, 20)]
    answers = [httpx.get(f"{server.url}/explorer/api/tasks/{s}", timeout=30).status_code for s in spellings]
    cost = node.count() - before
    served = [s for s, code in zip(spellings, answers, strict=True) if code == 200]
    assert cost == 0, f"{len(served)} aliases of task {task_id} were read afresh: {cost} RPC calls"


def test_the_market_page_reads_no_table_in_full(chainless_api: ApiServer) -> None:
    """Every query the market and batch pages run, as SQLite plans it, must search an index rather than scan
    a table that grows with use (batches, results, work units, acceptances, signatures). Then the market's
    last-day batch counts (`WHERE created_at >= ? GROUP BY status`, reads.py Explorer._market) scan all of
    `batches` (SQLite walks all of ix_batches_status: the only index with created_at is (owner, created_at)),
    every batch ever stored, once per PAGE_TTL_S (fix: an index on batches(created_at), as 0015 added for
    results)."""
    database = chainless_api.app.state.database
    batch, _ = stored(database)
    seen: list[tuple[str, object]] = []

    def record(_conn: object, _cursor: object, statement: str, parameters: object, *_rest: object) -> None:
        if statement.lstrip().upper().startswith("SELECT"):
            seen.append((statement, parameters))

    event.listen(database.engine, "before_cursor_execute", record)
    try:
        for path in ("/explorer/api/market", f"/explorer/api/batches/{batch}"):
            assert httpx.get(chainless_api.url + path).status_code == 200
    finally:
        event.remove(database.engine, "before_cursor_execute", record)
    growing = ("batches", "results", "work_units", "acceptances", "signatures")
    scans = []
    with database.engine.connect() as connection:
        for statement, parameters in seen:
            plan = connection.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}", parameters).fetchall()  # type: ignore[arg-type]
            for row in plan:
                detail = str(row[-1])
                if any(detail == f"SCAN {t}" or detail.startswith(f"SCAN {t} ") for t in growing):
                    scans.append((detail, " ".join(statement.split())[:160]))
    assert scans == [], scans


def test_an_unknown_static_file_is_the_explorer_s_404_page(chainless_api: ApiServer) -> None:
    """/explorer/static/<unknown> must be the explorer's HTML 404 page, as every other unknown explorer path
    is (docs/security.md, routes.py docstring). Then the StaticFiles mount (routes.py install) raises
    Starlette's HTTPException, which the API's handler answers as JSON (fix: a StaticFiles subclass, or an
    exception handler for paths under /explorer, that renders error.html)."""
    for path in ("/explorer/static/nope.js", "/explorer/static/", "/explorer/static/..%2f..%2freads.py"):
        answer = httpx.get(chainless_api.url + path)
        assert answer.status_code == 404
        assert answer.headers["content-security-policy"] == HEADERS["Content-Security-Policy"]
        assert answer.headers["content-type"] == "text/html; charset=utf-8", (path, answer.text[:120])
