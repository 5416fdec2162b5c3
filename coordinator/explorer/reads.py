"""What the explorer's pages read, and the bounds on it: every query has a row cap, every chain read a cap on
how many calls a page makes, and each page's reads are kept for a few seconds (coordinator.explorer.cache)
and run on at most READ_THREADS worker threads at a time, so a visitor asking for many pages, or for one very
often, makes the coordinator do no more than that. Ids are checked before anything is read: a task or
dispute id past the chain's count (read once per few seconds) is unknown without a call of its own."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import TypeVar

import anyio
import requests
from sqlalchemy import func, select
from sqlalchemy.orm import Session
from web3.exceptions import Web3Exception

from client_sdk.chain.contracts import Market
from client_sdk.chain.types import DisputeStatus, Resolution
from client_sdk.errors import ChainError
from coordinator.chain import CoordinatorChain
from coordinator.config import Settings
from coordinator.db.models import Acceptance, Batch, Miner, PipelineRecord, Result, Signature, WorkUnit
from coordinator.db.session import Database
from coordinator.explorer import views
from coordinator.explorer.cache import Fresh
from coordinator.explorer.logs import Forward, Newest
from coordinator.services.batches import usages
from coordinator.services.errors import NotFound, ServiceError
from coordinator.services.live import LiveMembership
from coordinator.services.recent import Recent

T = TypeVar("T")

READ_THREADS = 2  # explorer reads running at once; more visitors wait without holding a thread
PAGE_TTL_S = 2.0  # a page's reads are this old at most (its script polls every few seconds)
CACHED_PAGES = 256
MAX_MINERS = 100  # miners the market page reads (oldest joined first), each one stake read on-chain
MAX_PIPELINES = 20  # active pipelines drawn
RECENT_TASKS = 10  # newest tasks the market page lists
RECENT_DISPUTES = 20  # newest disputes the disputes page lists
MAX_VERIFIERS = 50  # newest registered verifiers the disputes page reads
MAX_JURORS = 23  # jurors read per round (the largest round has 23 seats)
RECENT_BATCHES_S = 86_400  # the market page counts the batches of the last day
MAX_ID = 2**63 - 1  # as the API and the database bound ids
BATCH_ID = re.compile(r"batch_[0-9a-f]{24}")
CHAIN_ERRORS = (ChainError, requests.RequestException, Web3Exception, OSError)


class Unavailable(ServiceError):
    """The chain could not be read (503): the page says so instead of failing."""


def batch_id(text: str) -> str:
    """`text` if it has the shape of a batch id, else NotFound: nothing is looked up for any other string."""
    if not BATCH_ID.fullmatch(text):
        raise NotFound("batch", text[:40])
    return text


def chain_id(kind: str, text: str, known: Callable[[], int]) -> int:
    """A task or dispute id from the path: a decimal from 1 to `known()` (the chain's count) written without
    leading zeros (one spelling per id: each would be a page of its own to read), else NotFound. The count is
    asked for only once the text has that shape: a made-up spelling costs no read at all."""
    canonical = text.isascii() and text.isdecimal() and len(text) <= 19 and not text.startswith("0")
    if not (canonical and int(text) <= min(known(), MAX_ID)):
        raise NotFound(kind, text[:40])
    return int(text)


class Explorer:
    """The explorer's reads over the coordinator's database, live membership and (when connected) chain."""

    def __init__(
        self,
        database: Database,
        live: LiveMembership,
        chain: CoordinatorChain | None,
        settings: Callable[[], Settings],
    ) -> None:
        self.database, self.live, self.chain, self.settings = database, live, chain, settings
        self.pages: Fresh[tuple[str, str], views.Page] = Fresh(CACHED_PAGES, PAGE_TTL_S)
        self.counts: Fresh[str, tuple[int, int]] = Fresh(1, PAGE_TTL_S)
        # per resolved dispute, the search for its DisputeResolved event (read on until found, then final)
        self.resolutions: Recent[int, Forward[Resolution]] = Recent(CACHED_PAGES)
        self.registrations: Recent[str, Newest[str]] = Recent(1)  # the newest VerifierRegistered
        self.symbols: Recent[str, str] = Recent(1)
        self.limiter = anyio.CapacityLimiter(READ_THREADS)

    async def page(self, kind: str, key: str) -> views.Page:
        """The view model of page `kind` (market, batch, task, dispute, disputes) for `key` (an id, or "")."""
        builders: dict[str, Callable[[str], views.Page]] = {
            "market": lambda _key: self._market(),
            "batch": self._batch,
            "task": self._task,
            "dispute": self._dispute,
            "disputes": lambda _key: self._disputes(),
        }
        build = builders[kind]
        # the explorer's own threads first: visitors waiting for them hold none of the API's request slots
        async with self.limiter, self.database.request_slots:
            return await anyio.to_thread.run_sync(
                lambda: self.pages.get((kind, key), lambda: self._guarded(lambda: build(key)))
            )

    def _guarded(self, build: Callable[[], T]) -> T:
        try:
            return build()
        except CHAIN_ERRORS as exc:
            raise Unavailable(
                f"the chain cannot be read now ({type(exc).__name__})", "chain_unavailable"
            ) from exc

    def _market_chain(self) -> Market:
        if self.chain is None:
            raise Unavailable("this coordinator is not connected to a chain", "no_chain")
        return self.chain.market

    def _symbol(self, market: Market) -> str:
        return self.symbols.get("symbol", lambda: market.token.symbol)

    def _served(self) -> list[tuple[str, bytes]]:
        return [(m.name, m.model_hash) for m in self.settings().models]

    def _chain_counts(self) -> tuple[int, int]:
        """(tasks, disputes) on-chain, kept for PAGE_TTL_S: what every id in a path is checked against."""
        market = self._market_chain()
        return self.counts.get(
            "counts", lambda: (market.tasks.task_count(), market.arbitration.dispute_count())
        )

    # -- the pages

    def _market(self) -> views.Page:
        now = int(time.time())
        with self.database.session() as session:
            rows = list(
                session.scalars(select(Miner).order_by(Miner.joined_at, Miner.address).limit(MAX_MINERS + 1))
            )
            miners, more = rows[:MAX_MINERS], len(rows) > MAX_MINERS
            pipelines = list(
                session.scalars(
                    select(PipelineRecord)
                    .where(PipelineRecord.active)
                    .order_by(PipelineRecord.id.desc())
                    .limit(MAX_PIPELINES)
                )
            )[::-1]
            per_minute = _tokens_by_minute(session, now)
            # the last day's batches by the created_at index, then counted: grouped in one query, SQLite
            # would rather walk the status index through every batch ever stored
            day = (
                select(Batch.status)
                .where(Batch.created_at >= now - RECENT_BATCHES_S)
                .cte("day")
                .prefix_with("MATERIALIZED")
            )
            by_status = select(day.c.status, func.count()).group_by(day.c.status)
            batch_counts = {str(s): int(n) for s, n in session.execute(by_status)}
        beats = self.live.alive(m.address for m in miners)
        stakes, counts = {}, None
        if self.chain is not None:
            market = self.chain.market
            stakes = {m.address: market.registry.stake_of(m.address) for m in miners}
            tasks, disputes = self._chain_counts()
            latest = market.w3.eth.get_block("latest")
            newest = range(tasks, max(0, tasks - RECENT_TASKS), -1)
            counts = views.ChainCounts(
                tasks=tasks,
                disputes=disputes,
                audit_pool=market.escrow.audit_pool(),
                chain_time=int(latest["timestamp"]),
                block=int(latest["number"]),
                symbol=self._symbol(market),
                recent_tasks={task_id: market.tasks.get_task(task_id).status for task_id in newest},
            )
        inputs = views.MinerInputs(miners, beats, stakes, pipelines)
        return views.market_page(self._served(), inputs, more, per_minute, batch_counts, counts, now)

    def _batch(self, key: str) -> views.Page:
        with self.database.session() as session:
            batch = session.get(Batch, batch_id(key))
            if batch is None:
                raise NotFound("batch", key)
            by_status = select(WorkUnit.status, func.count()).where(WorkUnit.batch_id == batch.id)
            units = {str(s): int(n) for s, n in session.execute(by_status.group_by(WorkUnit.status))}
            accepted = session.scalar(select(func.count()).where(Acceptance.batch_id == batch.id)) or 0
            signed = session.scalar(select(func.count()).where(Signature.batch_id == batch.id)) or 0
            tokens = usages(session, [batch.id]).get(batch.id, (0, 0))
            inputs = views.BatchInputs(batch, tokens, units, accepted, signed)
            return views.batch_page(inputs, int(time.time()))

    def _task(self, key: str) -> views.Page:
        market = self._market_chain()
        task_id = chain_id("task", key, lambda: self._chain_counts()[0])
        tasks = market.tasks
        task = tasks.get_task(task_id)
        inputs = views.TaskInputs(
            task_id=task_id,
            task=task,
            escrow=market.escrow.escrow_of(task_id),
            prices=tasks.prices_of(task_id),
            challenge_ends_at=tasks.challenge_ends_at(task_id) if task.committed_at else 0,
            miners=tasks.miners_of(task_id),
            signers=tasks.signers_of(task_id),
            signed_mask=tasks.signed_mask_of(task_id),
            audit=market.audits.audit_of(task_id),
            owner_dispute=market.arbitration.dispute_of_task(task_id),
            chain_time=market.chain_time(),
            symbol=self._symbol(market),
        )
        return views.task_page(inputs, views.model_names(self._served()), int(time.time()))

    def _dispute(self, key: str) -> views.Page:
        market = self._market_chain()
        dispute_id = chain_id("dispute", key, lambda: self._chain_counts()[1])
        arbitration = market.arbitration
        record = arbitration.get_dispute(dispute_id)
        rounds = []
        for index in range(record.round + 1):
            jurors = arbitration.jurors_of(dispute_id, index)[:MAX_JURORS]
            rounds.append(
                views.RoundInputs(
                    arbitration.round_of(dispute_id, index),
                    [(juror, arbitration.juror_of(dispute_id, index, juror)) for juror in jurors],
                )
            )
        resolution = None
        if record.status != DisputeStatus.OPEN:
            search = self.resolutions.get(
                dispute_id,
                lambda: Forward(
                    record.opened_at_block,
                    lambda start, end: arbitration.resolutions_between(dispute_id, start, end),
                    keep=1,
                    once=True,
                ),
            )
            resolution = next(iter(search.read(market.w3.eth.block_number)), None)
        inputs = views.DisputeInputs(
            dispute_id=dispute_id,
            dispute=record,
            rounds=rounds,
            pipeline=arbitration.pipeline_of(dispute_id),
            resolution=resolution,
            chain_time=market.chain_time(),
            symbol=self._symbol(market),
        )
        return views.dispute_page(inputs, int(time.time()))

    def _disputes(self) -> views.Page:
        market = self._market_chain()
        newest = self._chain_counts()[1]
        disputes = {
            did: market.arbitration.get_dispute(did)
            for did in range(newest, max(0, newest - RECENT_DISPUTES), -1)
        }
        registry = market.verifiers
        registrations = self.registrations.get(
            "verifiers", lambda: Newest(market.deployment.block, registry.registered_between, MAX_VERIFIERS)
        )
        registered = registrations.read(market.w3.eth.block_number)  # an address registers once
        verifiers = [
            views.VerifierInputs(v, registry.verifier_of(v), registry.models_of(v))
            for v in reversed(registered)
        ]
        names = views.model_names(self._served())
        return views.disputes_page(disputes, verifiers, registry.min_stake(), names, self._symbol(market))


def _tokens_by_minute(session: Session, now: int) -> dict[int, int]:
    """Output tokens of the results stored in each minute (unix time // 60) of the chart's span: one indexed
    range of the results table, summed by the database (at most THROUGHPUT_MINUTES rows come back)."""
    start = (now // 60 - views.THROUGHPUT_MINUTES + 1) * 60
    minute = Result.created_at // 60
    rows = session.execute(
        select(minute, func.sum(Result.output_tokens)).where(Result.created_at >= start).group_by(minute)
    )
    return {int(m): int(tokens or 0) for m, tokens in rows}
