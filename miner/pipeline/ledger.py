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

A step is checked whole before it changes anything (every finish, preemption and feed names an open request of
its own microbatch, every write agrees with what is recorded, the new requests and the pages fit): a step
refused leaves the ledger as it was, but for lost requests reclaimed to make room. A hostile peer's refused
frame once left finish notices applied that no sink ever took, which outlived every session.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from miner.kv.blocks import BlockManager
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

    def check_write(self, position: int, tokens: tuple[int, ...] | list[int]) -> None:
        """Raises FrameError unless `write(position, tokens)` fits: no gap, and known tokens agree (a
        re-prefill repeats them)."""
        if position > len(self.tokens):
            raise FrameError(f"request {self.spec.request_id}: tokens at {position} leave a gap")
        known = self.tokens[position : position + len(tokens)]
        if known != list(tokens[: len(known)]):
            raise FrameError(f"request {self.spec.request_id}: tokens at {position} contradict earlier ones")

    def write(self, position: int, tokens: tuple[int, ...] | list[int]) -> None:
        """Records `tokens` from `position` on (see `check_write`)."""
        self.check_write(position, tokens)
        self.tokens.extend(tokens[len(self.tokens) - position :])


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
        self._microbatch_of: dict[int, int] = {}  # recorded request -> the microbatch that introduced it

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
        fresh._microbatch_of = {r: self._microbatch_of[r] for r in fresh.records}
        return fresh

    def hand_over(self, request_id: int) -> RequestRecord:
        """Forgets a finished request's record and returns it (a node's stage hands it to its journal)."""
        self._microbatch_of.pop(request_id, None)
        return self.records.pop(request_id)

    def apply(self, header: Header) -> list[list[int]]:
        """Frees, records and reserves what an activations header describes; returns the block table of each
        request (logical pages of the header's microbatch). Raises FrameError if the header does not fit,
        having changed nothing (but reclaimed lost requests)."""
        if header.microbatch >= len(self.blocks):
            raise FrameError(f"microbatch {header.microbatch} is not one of {len(self.blocks)}")
        now = self._clock()
        self._check(header, now)
        microbatch, blocks = header.microbatch, self.blocks[header.microbatch]
        for done in header.finished:
            record = self.records[done.request_id]
            record.write(done.position, [done.token])
            record.finished = True
            blocks.release(done.request_id)
            del self._named[done.request_id]
        for request_id in header.preempted:
            blocks.release(request_id)
        for spec in header.new_requests:
            if spec.request_id not in self.records:
                self.records[spec.request_id] = RequestRecord(spec)
                self._microbatch_of[spec.request_id] = microbatch
                self._named[spec.request_id] = now
        tables = []
        for request_id, position, tokens in zip(
            header.request_ids, header.positions, header.token_runs(), strict=True
        ):
            self.records[request_id].write(position, tokens)
            self._named[request_id] = now
            tables.append(list(blocks.reserve(request_id, position + len(tokens))))
        return tables

    def _check(self, header: Header, now: float) -> None:
        """Raises FrameError unless `apply(header)` fits in full; may reclaim lost requests to make room."""
        microbatch = header.microbatch
        introduced = {spec.request_id for spec in header.new_requests}
        for done in header.finished:
            self._open_of(done.request_id, microbatch).check_write(done.position, [done.token])
        for request_id in header.preempted:
            if self._microbatch_of.get(request_id, microbatch) != microbatch:
                raise FrameError(f"request {request_id} is not of microbatch {microbatch}")
        for request_id in introduced:
            record = self.records.get(request_id)
            if record is not None and record.finished:
                raise FrameError(f"request {request_id} has finished: it cannot be introduced again")
        for request_id, position, tokens in zip(
            header.request_ids, header.positions, header.token_runs(), strict=True
        ):
            if request_id in self.records:
                self._open_of(request_id, microbatch).check_write(position, tokens)
            elif request_id not in introduced:
                raise FrameError(f"request {request_id} was never introduced")
            elif position != 0:
                raise FrameError(f"request {request_id}: tokens at {position} leave a gap")
        if self._shortfall(header, introduced) is not None:
            self._reclaim(now, set(header.request_ids) | {done.request_id for done in header.finished})
            why = self._shortfall(header, introduced)
            if why is not None:
                raise FrameError(why)

    def _shortfall(self, header: Header, introduced: set[int]) -> str | None:
        """Why the step's new requests or its pages do not fit now; None when they do."""
        finishing = {done.request_id for done in header.finished}
        freeing = finishing | set(header.preempted)
        opening = {r for r in introduced if r not in self.records}
        if len(self._named.keys() - finishing) + len(opening) > self.max_open:
            return f"{len(opening)} new requests: {len(self._named)} of {self.max_open} are open already"
        blocks = self.blocks[header.microbatch]
        # pages once the step's finished and preempted requests are freed, as `apply` frees them first
        free = blocks.free_pages + sum(blocks.held(r) for r in freeing)
        needed = 0
        for request_id, position, tokens in zip(
            header.request_ids, header.positions, header.token_runs(), strict=True
        ):
            held = 0 if request_id in freeing else blocks.held(request_id)
            needed += max(0, blocks.pages_for(position + len(tokens)) - held)
        if needed > free:
            return f"the step does not fit in the page pool: {needed} pages needed, {free} free"
        return None

    def _open_of(self, request_id: int, microbatch: int) -> RequestRecord:
        """The record of an open request of `microbatch`; FrameError if there is none."""
        record = self.records.get(request_id)
        if record is None:
            raise FrameError(f"request {request_id} was never introduced")
        if record.finished:
            raise FrameError(f"request {request_id} has finished")
        if self._microbatch_of.get(request_id) != microbatch:
            raise FrameError(f"request {request_id} is not of microbatch {microbatch}")
        return record

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
                self._microbatch_of.pop(request_id, None)
        self.reclaimed += len(lost)
        return bool(lost)
