"""Prometheus metrics at /metrics: request counts and latencies per route, the lines handed to a head to
resume from another pipeline's output tokens, and, read at each scrape, batches by status and the live
miners. One registry per app, so several apps (tests) never collide; routes count on `app.state.metrics`."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass

from fastapi import FastAPI, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from sqlalchemy import func, select

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

    @app.middleware("http")
    async def measure(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        started = time.perf_counter()
        response = await call_next(request)
        route = request.scope.get("route")
        path = getattr(route, "path", "unmatched")  # the template, so ids do not explode the label set
        requests.labels(request.method, path, str(response.status_code)).inc()
        latency.labels(path).observe(time.perf_counter() - started)
        return response

    @app.get("/metrics", summary="Prometheus metrics", tags=["operations"])
    def metrics() -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
