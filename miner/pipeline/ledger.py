"""What every stage keeps in step from the headers it sees: page tables per microbatch and, per request, the
token ids it was fed or sampled (prompt + output), which it signs in the next step of the protocol.

Page tables only have to be valid on each stage, not equal to the first stage's: pages of the finished and
preempted requests are freed before the step's reservations, so a stage never runs short where the first
stage's scheduler did not.

A previous stage that introduces requests and never finishes them (a head that died, a hostile peer) must not
hold this stage's pages for ever: when a step does not fit, the pages of requests no header has named for
`reclaim_after_s` are freed first (an honest head names every running request in each of its microbatch's
steps, so only a request it lost goes that long unnamed), and at most as many requests are open as the page
pool has pages (every request holds a page once it is fed a token).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from miner.kv.blocks import BlockManager, OutOfPages
from miner.transport.frames import FrameError, Header, RequestSpec


@dataclass
class RequestRecord:
    """A request as this stage saw it: its prompt and the outputs produced so far, in one token list (a
    resumed request's output includes the tokens generated before it was resumed here)."""

    spec: RequestSpec
    tokens: list[int] = field(default_factory=list)
    finished: bool = False

    @property
    def prompt(self) -> list[int]:
        return self.tokens[: self.spec.prompt_len]

    @property
    def output(self) -> list[int]:
        return self.tokens[self.spec.prompt_len :]

    def write(self, position: int, tokens: tuple[int, ...] | list[int]) -> None:
        """Records `tokens` from `position` on; known tokens must agree (a re-prefill repeats them)."""
        if position > len(self.tokens):
            raise FrameError(f"request {self.spec.request_id}: tokens at {position} leave a gap")
        known = self.tokens[position : position + len(tokens)]
        if known != list(tokens[: len(known)]):
            raise FrameError(f"request {self.spec.request_id}: tokens at {position} contradict earlier ones")
        self.tokens.extend(tokens[len(known) :])


RECLAIM_AFTER_S = 60.0  # a request unnamed this long has been lost by its head: its pages may be reused


class StageLedger:
    def __init__(
        self,
        num_microbatches: int,
        pages_per_microbatch: int,
        page_size: int,
        reclaim_after_s: float = RECLAIM_AFTER_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.blocks = [BlockManager(pages_per_microbatch, page_size) for _ in range(num_microbatches)]
        self.records: dict[int, RequestRecord] = {}
        self.max_open = num_microbatches * pages_per_microbatch
        self.reclaim_after_s = reclaim_after_s
        self.reclaimed = 0  # requests whose pages were freed unfinished
        self._clock = clock
        self._named: dict[int, float] = {}  # open request -> when a header last named it

    def restarted(self) -> StageLedger:
        """An empty ledger of the same shape for a new session, with this one's finished records (not yet
        handed on) kept."""
        fresh = StageLedger(
            len(self.blocks),
            self.blocks[0].num_pages,
            self.blocks[0].page_size,
            self.reclaim_after_s,
            self._clock,
        )
        fresh.records = {r: record for r, record in self.records.items() if record.finished}
        return fresh

    def apply(self, header: Header) -> list[list[int]]:
        """Frees, records and reserves what an activations header describes; returns the block table of each
        request (logical pages of the header's microbatch). Raises FrameError if the header does not fit."""
        if header.microbatch >= len(self.blocks):
            raise FrameError(f"microbatch {header.microbatch} is not one of {len(self.blocks)}")
        blocks = self.blocks[header.microbatch]
        now = self._clock()
        self._check_room(header, now)
        for done in header.finished:
            record = self._record(done.request_id)
            record.write(done.position, [done.token])
            record.finished = True
            blocks.release(done.request_id)
            self._named.pop(done.request_id, None)
        for request_id in header.preempted:
            blocks.release(request_id)
        for spec in header.new_requests:
            if spec.request_id not in self.records:
                self.records[spec.request_id] = RequestRecord(spec)
                self._named[spec.request_id] = now
        tables = []
        for request_id, position, tokens in zip(
            header.request_ids, header.positions, header.token_runs(), strict=True
        ):
            self._record(request_id).write(position, tokens)
            self._named[request_id] = now
            try:
                tables.append(self._reserve(blocks, request_id, position + len(tokens), header, now))
            except OutOfPages as exc:
                raise FrameError(f"request {request_id} does not fit in the page pool: {exc}") from None
        return tables

    def _check_room(self, header: Header, now: float) -> None:
        """Refuses, before anything changes, a step whose new requests would open more than `max_open` (after
        reclaiming lost ones): a flood of requests is refused whole and leaves none of them behind."""
        opening = {s.request_id for s in header.new_requests if s.request_id not in self.records}
        closing = {f.request_id for f in header.finished}

        def open_after() -> int:
            return len(self._named.keys() - closing) + len(opening)

        if open_after() > self.max_open:
            self._reclaim(now, set(header.request_ids))
        if open_after() > self.max_open:
            raise FrameError(
                f"{len(opening)} new requests: {len(self._named)} of {self.max_open} are open already"
            )

    def _reserve(
        self, blocks: BlockManager, request_id: int, tokens: int, header: Header, now: float
    ) -> list[int]:
        """`blocks.reserve`, after freeing the pages of lost requests if the pool is short."""
        if not blocks.can_hold(request_id, tokens):
            self._reclaim(now, set(header.request_ids))
        return list(blocks.reserve(request_id, tokens))

    def _reclaim(self, now: float, keep: set[int]) -> bool:
        """Forgets the open requests not named for `reclaim_after_s` (except `keep`) and frees their pages
        in every microbatch; True if there were any."""
        lost = [r for r, named in self._named.items() if now - named > self.reclaim_after_s and r not in keep]
        for request_id in lost:
            for blocks in self.blocks:
                blocks.release(request_id)
            del self._named[request_id]
            record = self.records.get(request_id)
            if record is not None and not record.finished:
                del self.records[request_id]
        self.reclaimed += len(lost)
        return bool(lost)

    def _record(self, request_id: int) -> RequestRecord:
        record = self.records.get(request_id)
        if record is None:
            raise FrameError(f"request {request_id} was never introduced")
        return record
