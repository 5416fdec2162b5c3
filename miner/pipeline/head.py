"""The first stage's scheduling: one continuous-batching scheduler per microbatch, each with at most one step
in flight around the ring.

It turns a scheduler's decision into the header every other stage follows (tokens fed, positions, which rows
sample, finished and preempted requests), and the sampled tokens that come back into sequence progress and
completions. Requests go to microbatch `request_id % microbatches`, as in the in-process Engine, so both make
the same batches.

Every step carries the head's epoch (plan version, session). A microbatch whose tokens do not come back within
`stall_s` (a stage that restarted and lost its pages, a frame lost in a re-plan) makes the head start over in
a new session: every sequence is re-prefilled from its tokens so far, the other stages free what they held
for the old session when the new one reaches them, and tokens of the old session are refused.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import cast

import torch

from miner.engine.scheduler import ScheduledChunk, Scheduler
from miner.engine.sequence import Sequence
from miner.kv.blocks import BlockManager
from miner.transport.frames import Finished, FrameError, Header, RequestSpec, message

log = logging.getLogger(__name__)
STALL_S = 20.0  # a step's tokens not back this long: the pipeline lost it (steps take well under a second)


def new_session(after: int = 0) -> int:
    """A session number larger than `after` and than any a restarted process drew before (the clock's
    nanoseconds)."""
    return max(time.time_ns(), after + 1)


class _LoggedBlocks(BlockManager):
    """Remembers every release, so preemptions inside `Scheduler.schedule` reach the other stages."""

    def __init__(self, num_pages: int, page_size: int) -> None:
        super().__init__(num_pages, page_size)
        self.released: list[int] = []

    def release(self, seq_id: Hashable) -> None:
        super().release(seq_id)
        self.released.append(cast(int, seq_id))  # the scheduler's sequences, whose ids are request ids


@dataclass(frozen=True)
class Completion:
    request_id: int
    prompt_len: int
    output: tuple[int, ...]


class Head:
    def __init__(
        self,
        num_microbatches: int,
        pages_per_microbatch: int,
        page_size: int,
        max_seqs: int = 32,
        token_budget: int = 512,
        route: tuple[str, ...] = (),
        plan_version: int = 0,
        stall_s: float = STALL_S,
        clock: Callable[[], float] = time.monotonic,
        vocab_size: int | None = None,
    ) -> None:
        self.blocks = [_LoggedBlocks(pages_per_microbatch, page_size) for _ in range(num_microbatches)]
        self.schedulers = [Scheduler(b, max_seqs, token_budget) for b in self.blocks]
        self.route = route
        self.epoch = (plan_version, new_session())
        self.stall_s = stall_s
        self.restarts = 0
        self.sequences: dict[int, Sequence] = {}
        self._in_flight: dict[int, list[ScheduledChunk]] = {}  # microbatch -> its chunks that sample
        self._sent_at: dict[int, float] = {}  # microbatch in flight -> when its step left
        self._finished: list[list[Finished]] = [[] for _ in range(num_microbatches)]
        self._turn = 0
        self._clock = clock
        self.vocab_size = vocab_size  # tokens coming back must be below it (None: not checked)

    @property
    def idle(self) -> bool:
        """Nothing waiting, running, in flight, or left to tell the other stages."""
        return not self._in_flight and all(
            s.idle and not f for s, f in zip(self.schedulers, self._finished, strict=True)
        )

    def submit(self, header: Header) -> None:
        """Queues the requests of a "submit" message; a request that cannot run is logged and dropped. A run
        longer than its prompt is a resumed request: the rest is the output generated before, which the
        request starts with (every stage prefills it with the prompt) and which counts towards max_tokens."""
        specs = {spec.request_id: spec for spec in header.new_requests}
        for request_id, tokens in zip(header.request_ids, header.token_runs(), strict=True):
            spec = specs.get(request_id)
            if spec is None or not 0 < spec.prompt_len <= len(tokens):
                log.warning("dropped request %d: no sampling parameters or a wrong prompt length", request_id)
                continue
            params = spec.params
            prompt, output = list(tokens[: spec.prompt_len]), list(tokens[spec.prompt_len :])
            if params.completed_by(output):
                log.warning("dropped request %d: it resumes with its whole output already", request_id)
                continue
            if request_id in self.sequences:
                log.warning("dropped request %d: the id is already in use", request_id)
                continue
            seq = Sequence(request_id, prompt, params, output)
            try:
                self.schedulers[request_id % len(self.schedulers)].add(seq)
            except ValueError as exc:
                log.warning("dropped request %d: %s", request_id, exc)
                continue
            self.sequences[request_id] = seq

    def progress(self) -> dict[int, tuple[int, ...]]:
        """The output tokens so far of each request not yet finished that has some."""
        return {request_id: tuple(seq.output) for request_id, seq in self.sequences.items() if seq.output}

    def next_step(self) -> tuple[Header, torch.Tensor] | None:
        """The next microbatch step to send (its header and the token ids fed), or None if every microbatch
        with work is in flight."""
        count = len(self.schedulers)
        for offset in range(count):
            microbatch = (self._turn + offset) % count
            scheduler = self.schedulers[microbatch]
            if microbatch in self._in_flight or (scheduler.idle and not self._finished[microbatch]):
                continue
            self._turn = microbatch + 1
            return self._step(microbatch)
        return None

    @property
    def stalled(self) -> bool:
        """A step in flight has not come back within `stall_s`."""
        now = self._clock()
        return any(now - sent > self.stall_s for sent in self._sent_at.values())

    def restart(self) -> None:
        """Starts a new session: nothing in flight, every sequence waiting to be re-prefilled from its tokens
        so far. Finished notices not sent yet are dropped with the old session (the other stages free its
        pages when the new session reaches them; a stage that never learns a line finished serves it again
        when asked to sign it)."""
        self.epoch = (self.epoch[0], new_session(self.epoch[1]))
        self.restarts += 1
        self._in_flight.clear()
        self._sent_at.clear()
        for scheduler, blocks, finished in zip(self.schedulers, self.blocks, self._finished, strict=True):
            scheduler.preempt_all()
            blocks.released.clear()
            finished.clear()

    def _step(self, microbatch: int) -> tuple[Header, torch.Tensor]:
        scheduler = self.schedulers[microbatch]
        chunks = scheduler.schedule()
        if not chunks and not scheduler.idle:
            raise RuntimeError("the scheduler could not place any sequence in the page pool")
        finished, self._finished[microbatch] = self._finished[microbatch], []
        done = {f.request_id for f in finished}
        preempted = [int(i) for i in self.blocks[microbatch].released if i not in done]
        self.blocks[microbatch].released.clear()
        self._in_flight[microbatch] = [c for c in chunks if c.completes_sequence_input]
        self._sent_at[microbatch] = self._clock()
        fed = [t for c in chunks for t in c.tokens]
        return message(
            "activations",
            microbatch,
            request_ids=tuple(c.seq.seq_id for c in chunks),
            positions=tuple(c.context_len for c in chunks),
            query_lens=tuple(len(c.tokens) for c in chunks),
            token_ids=tuple(fed),
            sample=tuple(c.completes_sequence_input for c in chunks),
            new_requests=tuple(
                RequestSpec(c.seq.seq_id, len(c.seq.prompt), c.seq.params)
                for c in chunks
                if c.context_len == 0
            ),
            finished=tuple(finished),
            preempted=tuple(preempted),
            route=self.route,
            tensor=torch.tensor(fed, dtype=torch.long),
            epoch=self.epoch,
        )

    def on_tokens(self, header: Header) -> list[Completion]:
        """Applies the tokens sampled for a microbatch step; returns the requests that finished."""
        if header.epoch != self.epoch:
            raise FrameError(f"tokens of session {header.epoch}, not of this head's {self.epoch}")
        expected = self._in_flight.get(header.microbatch)
        if expected is None or header.request_ids != tuple(c.seq.seq_id for c in expected):
            raise FrameError(f"tokens for microbatch {header.microbatch} that is not waiting for them")
        # everything checked before anything changes: a bad answer is dropped, and the step stays in flight
        if header.query_lens != (1,) * len(expected) or header.positions != tuple(
            len(c.seq.tokens) for c in expected
        ):
            raise FrameError(f"tokens for microbatch {header.microbatch} not one per request at its position")
        if self.vocab_size is not None and any(t >= self.vocab_size for t in header.token_ids):
            raise FrameError(f"a token outside the vocabulary of {self.vocab_size}")
        del self._in_flight[header.microbatch]
        del self._sent_at[header.microbatch]
        completions = []
        scheduler = self.schedulers[header.microbatch]
        for chunk, token in zip(expected, header.token_ids, strict=True):
            seq = chunk.seq
            position = len(seq.tokens)
            seq.append(token)
            if seq.finished:
                scheduler.finish(seq)
                self._finished[header.microbatch].append(Finished(seq.seq_id, position, token))
                completions.append(Completion(seq.seq_id, len(seq.prompt), tuple(seq.output)))
                del self.sequences[seq.seq_id]
        return completions
