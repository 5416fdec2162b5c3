"""Coordinator: what idle miners cost the API, when nodes poll (as they did) and when they wait for news.

A local market (demo.system.LocalSystem: anvil with the contracts, Redis, PostgreSQL, `coordinator serve`, the
Celery worker) with no miner processes; MINERS wallets are registered on-chain and joined through the API,
then each is played by this process as an idle node, signed exactly as a node signs (writes wallet-signed,
reads on a session token):

- polling (what a node did): GET acceptances and GET signing every 0.5 s, a heartbeat and GET assignment
  every 5 s;
- waiting (what a node does now): one long GET /v1/miners/wake at a time (25 s), a heartbeat every 5 s.

Rows: the API's CPU (its processes' utime + stime from /proc) per idle miner per second over WINDOW_S, with
one and two API processes; each miner route's latency (p50, p99), probed from a process of its own through
the second half of the one-process window; and each route's API CPU per request on an empty database and
after a long history (old plans, batches and units), which must not grow with it. Load generator and API
share the machine's cores; the CPU counted is the API's own.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import multiprocessing
import os
import random
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from multiprocessing import Queue
from pathlib import Path

import httpx
import numpy as np
import zmq
from eth_account import Account
from eth_account.signers.local import LocalAccount
from eth_utils.crypto import keccak
from rich.table import Table
from sqlalchemy import create_engine
from sqlalchemy.orm import Session

from bench._report import figure, publish, report_table
from client_sdk.auth import sign_request
from client_sdk.http import WalletSigner
from coordinator.db.models import Batch, File, PipelineRecord, WorkUnit
from demo.services import postgres_server
from demo.system import LocalSystem, SystemConfig

MINERS = 1024
WINDOW_S = 30.0
HEARTBEAT_S = 5.0
POLL_S = 0.5
WAKE_WAIT_S = 25
PROBE_EVERY_S = 0.02
PROBE_S = 60.0  # about 330 requests a route: a p99 of 3 outliers, not of 1
REGISTERING = 4  # miners registered and joined at a time
PROBERS = 16  # miners (of the idle ones) whose routes the probe calls
# what an idle node sends, in requests per second: polling, two reads every 0.5 s and a heartbeat and the
# assignment every 5 s; waiting, a heartbeat every 5 s and one wait for news every 25 s
OFFERED_RATE = {"polling": 2 / POLL_S + 2 / HEARTBEAT_S, "waiting": 1 / HEARTBEAT_S + 1 / WAKE_WAIT_S}
HISTORY_PLANS = 4_000  # old plan versions of 4 stages each
HISTORY_BATCHES = 10_000  # completed batches of 8 done units each
REQUESTS_PER_ROUTE = 200
TARGET_CPU_MS = 1.0  # API CPU per idle miner per second
TARGET_P99_MS = 200.0
ROUTES = (
    ("POST", "/v1/miners/heartbeat"),
    ("GET", "/v1/miners/assignment"),
    ("GET", "/v1/miners/acceptances"),
    ("GET", "/v1/miners/signing"),
    ("POST", "/v1/miners/work/claim"),
    ("GET", "/v1/miners/wake"),
)
BEAT = b'{"layer_latency_ms":1.0,"queue_depth":0,"units":[],"rtt_ms":{}}'


@dataclass(frozen=True)
class Idle:
    """One window of idle nodes: what a node sends (offered) and what the API answered (served), per miner
    and second, and the API's CPU per idle miner per second at the offered rate (its CPU per request served
    times the offered rate: a saturated API serves less than is offered)."""

    mode: str
    api_processes: int
    offered_per_miner_s: float
    served_per_miner_s: float
    measured_ms_per_miner_s: float  # the API's CPU over the window, per miner and second
    cpu_ms_per_miner_s: float  # the same at the offered rate
    errors: int

    @property
    def verdict_ms(self) -> float:
        """What the target is judged on: the larger of the two (the offered rate's when the API saturated,
        the measured one when the window's first seconds sent more than a node's steady rate)."""
        return max(self.measured_ms_per_miner_s, self.cpu_ms_per_miner_s)


@dataclass(frozen=True)
class RouteLatency:
    route: str
    p50_ms: float
    p99_ms: float
    count: int


@dataclass(frozen=True)
class RouteCost:
    route: str
    empty_ms: float
    history_ms: float


def tree_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) of a process and its descendants."""
    total, stack = 0.0, [pid]
    tick = os.sysconf("SC_CLK_TCK")
    while stack:
        current = stack.pop()
        with contextlib.suppress(FileNotFoundError, ProcessLookupError):
            fields = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
            for task in Path(f"/proc/{current}/task").iterdir():
                stack += [int(c) for c in (task / "children").read_text().split()]
    return total


class Node:
    """One idle node's connection: writes signed by its wallet, reads on its session token."""

    def __init__(self, url: str, account: LocalAccount, token: str) -> None:
        self.account = account
        self.http = httpx.AsyncClient(base_url=url, timeout=60)
        self.bearer = {"Authorization": f"Bearer {token}"}
        self.seen: int | None = None

    async def open(self) -> None:
        """Connects and beats (it is live again), and reads the wake counter an idle node has seen (its
        first wait answered at once)."""
        (await self.call("POST", "/v1/miners/heartbeat")).raise_for_status()
        answer = await self.call("GET", "/v1/miners/wake?wait_s=0")
        answer.raise_for_status()
        self.seen = int(answer.json()["counter"])

    async def send(self, method: str, path: str, counts: list[int]) -> httpx.Response | None:
        """`call`, counted in `counts` ([requests, errors]); None after a transport error."""
        counts[0] += 1
        try:
            response = await self.call(method, path)
        except httpx.TransportError:
            counts[1] += 1
            await asyncio.sleep(1)
            return None
        counts[1] += response.status_code >= 400
        return response

    async def call(self, method: str, path: str) -> httpx.Response:
        if method == "GET":
            return await self.http.get(path, headers=self.bearer)
        body = BEAT if path.endswith("heartbeat") else b""
        header = sign_request(self.account, method, path, body)
        headers = {"Authorization": header, "Content-Type": "application/json"}
        return await self.http.request(method, path, content=body, headers=headers)


def register_and_join(system: LocalSystem, count: int) -> list[tuple[LocalAccount, str]]:
    """`count` fresh miner wallets, registered on-chain (gas, tokens, stake) and joined through the API,
    REGISTERING at a time; with each one's session token."""
    with ThreadPoolExecutor(REGISTERING) as pool:
        joined = list(pool.map(partial(join_one, system), range(count)))
    print(f"  {count} miners registered and joined", flush=True)
    return joined


def join_one(system: LocalSystem, index: int) -> tuple[LocalAccount, str]:
    account = Account.from_key(keccak(text=f"idle miner {index}"))
    system.market.w3.provider.make_request("anvil_setBalance", [account.address, hex(10**20)])  # type: ignore[arg-type]
    endpoint = system.register(account)
    public, _secret = zmq.curve_keypair()
    device = {
        "gpu": "cpu",
        "memory_gb": 1.0,
        "tflops": 1.0,
        "mem_bandwidth_gb_s": 1.0,
        "layer_latency_ms": 1.0,
    }
    body = {
        "model": system.config.model,
        "endpoint": endpoint,
        "link_key": public.decode(),
        "region": system.config.region,
        "device": device,
    }
    with httpx.Client(base_url=system.api_url, auth=WalletSigner(account), timeout=60) as http:
        http.post("/v1/miners/join", json=body).raise_for_status()
        session = http.post("/v1/auth/session")
        session.raise_for_status()
    return account, session.json()["token"]


async def idle_node(node: Node, mode: str, until: float, counts: list[int]) -> None:
    """One node doing nothing but what an idle node does, until `until` (perf_counter): its heartbeats, and
    beside them (as a node's own threads do) its polls or its waits for news."""
    await asyncio.sleep(random.uniform(0, HEARTBEAT_S))  # nodes start at random phases
    await asyncio.gather(beats(node, mode, until, counts), news(node, mode, until, counts))


async def beats(node: Node, mode: str, until: float, counts: list[int]) -> None:
    while time.perf_counter() < until:
        routes = [("POST", "/v1/miners/heartbeat")] + [("GET", "/v1/miners/assignment")] * (mode == "polling")
        for method, path in routes:
            await node.send(method, path, counts)
        await asyncio.sleep(HEARTBEAT_S)


async def news(node: Node, mode: str, until: float, counts: list[int]) -> None:
    seen = node.seen
    while (now := time.perf_counter()) < until:
        if mode == "polling":
            await node.send("GET", "/v1/miners/acceptances", counts)
            await node.send("GET", "/v1/miners/signing", counts)
            await asyncio.sleep(POLL_S)
            continue
        wait_s = min(WAKE_WAIT_S, until - now)
        query = f"?wait_s={wait_s:.3f}" + ("" if seen is None else f"&seen={seen}")
        answer = await node.send("GET", "/v1/miners/wake" + query, counts)
        if answer is not None and answer.status_code == 200:
            seen = answer.json()["counter"]


def probe(
    url: str,
    prober: list[tuple[str, str]],
    start_at: float,
    seconds: float,
    out: Queue[dict[str, list[float]]],
) -> None:
    """In a process of its own (the load generator's event loop is busy with a thousand nodes, and its queue
    is not the API's latency): from `start_at` (wall clock), every route in turn every PROBE_EVERY_S for
    `seconds`, as the miners of `prober` ((key, session token) pairs); their latencies in ms on `out`."""

    async def probing() -> dict[str, list[float]]:
        nodes = [Node(url, Account.from_key(key), token) for key, token in prober]
        latencies: dict[str, list[float]] = {path: [] for _, path in ROUTES}
        await asyncio.sleep(max(0.0, start_at - time.time()))
        until, turn = time.perf_counter() + seconds, 0
        while time.perf_counter() < until:
            method, path = ROUTES[turn % len(ROUTES)]
            node, turn = nodes[turn % len(nodes)], turn + 1
            target = path + ("?wait_s=0" if path.endswith("wake") else "")
            started = time.perf_counter()
            with contextlib.suppress(httpx.TransportError):
                response = await node.call(method, target)
                if response.status_code < 500:
                    latencies[path].append((time.perf_counter() - started) * 1000)
            await asyncio.sleep(PROBE_EVERY_S)
        for node in nodes:
            await node.http.aclose()
        return latencies

    out.put(asyncio.run(probing()))


async def idle_window(
    url: str, miners: list[tuple[LocalAccount, str]], mode: str, api_pid: int, then_s: float = 0.0
) -> tuple[float, int, int]:
    """Idle nodes in `mode` for WINDOW_S, then `then_s` more (while the routes are probed): the API's CPU
    seconds, the requests sent and the errors, over WINDOW_S."""
    nodes = [Node(url, account, token) for account, token in miners]
    counts = [0, 0]
    measured: list[float] = []

    async def measure(cpu_before: float) -> None:
        await asyncio.sleep(WINDOW_S)
        measured.extend([tree_cpu_s(api_pid) - cpu_before, *counts])

    gc.collect()
    gc.freeze()  # the load generator's collector must not stall the clients (see bench.api_polling)
    try:
        opening = asyncio.Semaphore(64)  # nodes come up a few at a time, as they join

        async def open_one(node: Node) -> None:
            async with opening:
                await node.open()

        await asyncio.gather(*(open_one(n) for n in nodes))
        until = time.perf_counter() + WINDOW_S + then_s
        await asyncio.gather(
            measure(tree_cpu_s(api_pid)), *(idle_node(n, mode, until, counts) for n in nodes)
        )
    finally:
        gc.unfreeze()
        for node in nodes:
            await node.http.aclose()
    cpu, requests, errors = measured
    return cpu, int(requests), int(errors)


def add_history(database_url: str, miners: list[str]) -> None:
    """Old plans (inactive, 4 stages each, over these miners), completed batches with their done units."""
    engine = create_engine(database_url)
    rng = random.Random(7)
    with Session(engine) as session, session.begin():
        plans = []
        for version in range(HISTORY_PLANS):
            stage_miners = rng.sample(miners, 4)
            stages = [{"miner": m, "start": 8 * i, "end": 8 * i + 8} for i, m in enumerate(stage_miners)]
            plans.append(
                PipelineRecord(
                    model="history",
                    version=version,
                    stages=stages,
                    members=stage_miners,
                    active=False,
                    created_at=0,
                )
            )
        session.add_all(plans)
        session.flush()
        for index in range(HISTORY_BATCHES):
            file = File(
                id=f"file-h{index}",
                owner=miners[0],
                purpose="batch",
                filename="h.jsonl",
                bytes=1,
                created_at=0,
                line_count=64,
            )
            session.add(file)
            session.flush()
            batch = Batch(
                id=f"batch-h{index}",
                owner=miners[0],
                input_file_id=file.id,
                endpoint="/v1/chat/completions",
                model="history",
                completion_window="24h",
                task_id=10**9 + index,
                status="completed",
                created_at=0,
                expires_at=0,
                request_total=64,
                miners=plans[index % len(plans)].miners,
            )
            session.add(batch)
            session.flush()
            session.add_all(
                WorkUnit(
                    batch_id=batch.id,
                    line_indices=list(range(8 * u, 8 * u + 8)),
                    pipeline_id=plans[index % len(plans)].id,
                    status="done",
                    attempts=1,
                    created_at=0,
                )
                for u in range(8)
            )
    engine.dispose()


async def route_costs(url: str, miner: tuple[LocalAccount, str], api_pid: int) -> dict[str, float]:
    """API CPU ms per request of each route, REQUESTS_PER_ROUTE requests one after the other."""
    node = Node(url, *miner)
    costs = {}
    try:
        for method, path in ROUTES:
            target = path + ("?wait_s=0" if path.endswith("wake") else "")
            await node.call(method, target)  # warm
            before = tree_cpu_s(api_pid)
            for _ in range(REQUESTS_PER_ROUTE):
                await node.call(method, target)
            costs[path] = (tree_cpu_s(api_pid) - before) * 1000 / REQUESTS_PER_ROUTE
    finally:
        await node.http.aclose()
    return costs


def restart_api(system: LocalSystem, processes: int) -> int:
    """The API again with `processes` HTTP workers; its pid."""
    system.stop("api")
    system.config = dataclasses.replace(system.config, api_workers=processes)
    system.start_api()
    return system.processes["api"].pid


@contextlib.contextmanager
def market(scratch: Path) -> Iterator[LocalSystem]:
    """The market on PostgreSQL (what a coordinator for thousands of miners runs on)."""
    with postgres_server() as database_url:
        # the load generator beats every 5 s, late under load
        config = SystemConfig(miners=0, heartbeat_ttl_s=60, database_url=database_url)
        with LocalSystem(scratch, config) as system:
            yield system


def run(scratch: Path) -> tuple[list[Idle], list[RouteLatency], list[RouteCost]]:
    idles, latencies, costs = [], [], []
    with market(scratch) as system:
        miners = register_and_join(system, MINERS)
        pid = system.processes["api"].pid
        empty = asyncio.run(route_costs(system.api_url, miners[0], pid))
        for mode, processes in (("polling", 1), ("waiting", 1), ("waiting", 2)):
            if processes != system.config.api_workers:
                pid = restart_api(system, processes)
            prober, then_s = None, 0.0
            if mode == "waiting" and processes == 1:  # the routes' latency, once the CPU window ended
                queue: Queue[dict[str, list[float]]] = multiprocessing.get_context("spawn").Queue()
                keys = [("0x" + a.key.hex(), token) for a, token in miners[:PROBERS]]
                prober = multiprocessing.get_context("spawn").Process(
                    target=probe, args=(system.api_url, keys, time.time() + WINDOW_S + 1, PROBE_S, queue)
                )
                prober.start()
                then_s = PROBE_S + 2
            window = idle_window(system.api_url, miners, mode, pid, then_s)
            cpu, requests, errors = asyncio.run(window)  # the probing miners idle too
            per_miner_s = MINERS * WINDOW_S
            offered, served = OFFERED_RATE[mode], requests / per_miner_s
            measured_ms = cpu * 1000 / per_miner_s
            projected_ms = cpu * 1000 / requests * offered
            idles.append(Idle(mode, processes, offered, served, measured_ms, projected_ms, errors))
            print(f"  {mode}, {processes} API process(es): {idles[-1]}", flush=True)
            if prober is not None:
                probed = queue.get(timeout=WINDOW_S)
                prober.join()
                latencies = [
                    RouteLatency(p, float(np.percentile(v, 50)), float(np.percentile(v, 99)), len(v))
                    for p, v in probed.items()
                ]
        pid = restart_api(system, 1)
        add_history(system.database_url, [a.address for a, _ in miners])
        history = asyncio.run(route_costs(system.api_url, miners[0], pid))
        costs = [RouteCost(path, empty[path], history[path]) for _, path in ROUTES]
    return idles, latencies, costs


def report(idles: list[Idle], latencies: list[RouteLatency], costs: list[RouteCost]) -> list[Table]:
    idle = report_table(
        title=f"{MINERS:,} idle miners joined through the API, {WINDOW_S:.0f} s each row "
        f"(target: at most {TARGET_CPU_MS:g} ms of API CPU per idle miner per second)",
        caption=f"coordinator serve + Redis + PostgreSQL on {os.cpu_count()} cores, shared with the load "
        "generator; CPU from /proc, the API's processes only; at the offered rate: the CPU per request "
        "served times what a node sends (one API process polled by 1,024 nodes serves a fraction of it)",
        columns=(
            "nodes",
            "API processes",
            "offered / miner / s",
            "served / miner / s",
            "API CPU ms / miner / s measured",
            "at the offered rate",
            "idle miners per core",
            "errors",
            "target",
        ),
        left=("nodes",),
    )
    for row in idles:
        idle.add_row(
            row.mode,
            str(row.api_processes),
            f"{row.offered_per_miner_s:.2f}",
            f"{row.served_per_miner_s:.2f}",
            f"{row.measured_ms_per_miner_s:.3f}",
            f"{row.cpu_ms_per_miner_s:.3f}",
            f"{1000 / row.verdict_ms:,.0f}",
            str(row.errors),
            "met" if row.verdict_ms <= TARGET_CPU_MS else "missed",
        )
    routes = report_table(
        title=f"Each miner route's latency from a process of its own, beside {MINERS:,} waiting nodes "
        f"(one API process; target: p99 under {TARGET_P99_MS:.0f} ms)",
        columns=("route", "p50 ms", "p99 ms", "requests", "target"),
        left=("route",),
    )
    for latency in latencies:
        verdict = "met" if latency.p99_ms < TARGET_P99_MS else "missed"
        routes.add_row(
            latency.route, f"{latency.p50_ms:.1f}", f"{latency.p99_ms:.1f}", str(latency.count), verdict
        )
    flat = report_table(
        title=f"API CPU per request, one after the other: an empty database against a long history "
        f"({HISTORY_PLANS:,} old plans, {HISTORY_BATCHES:,} completed batches of 8 units)",
        columns=("route", "empty ms", "history ms", "ratio"),
        left=("route",),
    )
    for cost in costs:
        flat.add_row(
            cost.route,
            f"{cost.empty_ms:.2f}",
            f"{cost.history_ms:.2f}",
            f"{cost.history_ms / cost.empty_ms:.2f}",
        )
    return [idle, routes, flat]


def plot(idles: list[Idle], costs: list[RouteCost], path: Path) -> None:
    with figure(path, 1, 2, figsize=(12, 4), title="What idle miners cost the API") as (left, right):
        labels = [f"{r.mode}\n{r.api_processes} process(es)" for r in idles]
        left.bar(labels, [r.verdict_ms for r in idles])
        left.axhline(TARGET_CPU_MS, color="red", linestyle="--", label="target")
        left.set_ylabel("API CPU ms per idle miner per second")
        left.set_yscale("log")
        left.legend()
        x = np.arange(len(costs))
        right.bar(x - 0.2, [c.empty_ms for c in costs], 0.4, label="empty database")
        right.bar(x + 0.2, [c.history_ms for c in costs], 0.4, label="long history")
        right.set_xticks(x, [c.route.rsplit("/", 1)[1] for c in costs])
        right.set_ylabel("API CPU ms per request")
        right.legend()


def main() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        idles, latencies, costs = run(Path(scratch))
    publish(
        "idle_miners",
        report(idles, latencies, costs),
        width=130,
        plot=partial(plot, idles, costs),
    )


if __name__ == "__main__":
    main()
