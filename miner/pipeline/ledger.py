"""What every stage keeps in step from the headers it sees: page tables per microbatch and, per request, the
token ids it was fed or sampled (prompt + output), which it signs in the next step of the protocol.

Page tables only have to be valid on each stage, not equal to the first stage's: pages of the finished and
preempted requests are freed before the step's reservations, so a stage never runs short where the first
stage's scheduler did not.
"""

from __future__ import annotations

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


class StageLedger:
    def __init__(self, num_microbatches: int, pages_per_microbatch: int, page_size: int) -> None:
        self.blocks = [BlockManager(pages_per_microbatch, page_size) for _ in range(num_microbatches)]
        self.records: dict[int, RequestRecord] = {}

    def apply(self, header: Header) -> list[list[int]]:
        """Frees, records and reserves what an activations header describes; returns the block table of each
        request (logical pages of the header's microbatch). Raises FrameError if the header does not fit."""
        if header.microbatch >= len(self.blocks):
            raise FrameError(f"microbatch {header.microbatch} is not one of {len(self.blocks)}")
        blocks = self.blocks[header.microbatch]
        for done in header.finished:
            record = self._record(done.request_id)
            record.write(done.position, [done.token])
            record.finished = True
            blocks.release(done.request_id)
        for request_id in header.preempted:
            blocks.release(request_id)
        for spec in header.new_requests:
            self.records.setdefault(spec.request_id, RequestRecord(spec))
        tables = []
        for request_id, position, tokens in zip(
            header.request_ids, header.positions, header.token_runs(), strict=True
        ):
            self._record(request_id).write(position, tokens)
            try:
                tables.append(list(blocks.reserve(request_id, position + len(tokens))))
            except OutOfPages as exc:
                raise FrameError(f"request {request_id} does not fit in the page pool: {exc}") from None
        return tables

    def _record(self, request_id: int) -> RequestRecord:
        record = self.records.get(request_id)
        if record is None:
            raise FrameError(f"request {request_id} was never introduced")
        return record
