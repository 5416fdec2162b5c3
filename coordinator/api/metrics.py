"""Prometheus metrics at /metrics: request counts and latencies per route, the lines handed to a head to
resume from another pipeline's output tokens, and, read at each scrape, batches by status and the live
miners. One registry per app, so several apps (tests) never collide; routes count on `app.state.metrics`."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

from fastapi import FastAPI, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from sqlalchemy import func, select
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from coordinator.db.models import Batch, Miner
from coordinator.db.session import Database
from coordinator.services.live import LiveMembership


class StateCollector(Collector):
    def __init__(self, database: Database, live: LiveMembership) -> None:
        self.database = database
        self.live = live

    def collect(self) -> Iterator[GaugeMetricFamily]:
        batches = GaugeMetricFamily("batchmarket_batches", "Batches by status", labels=["status"])
        miners = GaugeMetricFamily(
            "batchmarket_miners", "Joined miners, and those live now", labels=["state"]
        )
        with self.database.session() as session:
            for status, count in session.execute(select(Batch.status, func.count()).group_by(Batch.status)):
                batches.add_metric([status], count)
            addresses = list(session.scalars(select(Miner.address)))
        miners.add_metric(["joined"], len(addresses))
        miners.add_metric(["live"], len(self.live.alive(addresses)))
        yield batches
        yield miners


@dataclass(frozen=True)
class MarketMetrics:
    """Counters the routes increment."""

    resumed_lines: Counter


class Measured:
    """Counts and times every HTTP request by its route's template (so ids do not explode the label set) and
    status. A plain ASGI middleware: Starlette's `@app.middleware("http")` runs each request through a task
    group and memory streams, a cost paid by every request."""

    def __init__(self, app: ASGIApp, requests: Counter, latency: Histogram) -> None:
        self.app, self.requests, self.latency = app, requests, latency

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started, status = time.perf_counter(), 500  # an exception that escapes answers 500

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            path = getattr(scope.get("route"), "path", "unmatched")  # the router sets it in this scope
            self.requests.labels(scope["method"], path, str(status)).inc()
            self.latency.labels(path).observe(time.perf_counter() - started)


def install(app: FastAPI, database: Database, live: LiveMembership) -> None:
    registry = CollectorRegistry()
    app.state.metrics = MarketMetrics(
        resumed_lines=Counter(
            "batchmarket_resumed_lines",
            "Lines claimed with output tokens to resume from (their unit's previous head was lost)",
            registry=registry,
        )
    )
    requests = Counter(
        "batchmarket_http_requests", "HTTP requests", ["method", "route", "status"], registry=registry
    )
    latency = Histogram(
        "batchmarket_http_request_seconds", "HTTP request latency", ["route"], registry=registry
    )
    registry.register(StateCollector(database, live))
    app.add_middleware(Measured, requests=requests, latency=latency)

    @app.get("/metrics", summary="Prometheus metrics", tags=["operations"])
    def metrics() -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
