"""The driver side of a pipeline: submits requests to the first stage and streams their completions back.

Both `miner run-local` (stages as local processes) and `miner serve` (stages on other machines) drive their
pipeline through this one class, over ZeroMQ, as any other peer of the first stage would.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import NamedTuple

from client_sdk.protocol.sampling import SamplingParams
from miner.pipeline.head import Completion
from miner.transport.frames import DEFAULT_LIMITS, RequestSpec, message
from miner.transport.link import Context, Inbox, Outbox
from miner.transport.security import LinkSecurity

SUBMIT_REQUESTS = 512  # requests per submit message, well under the frame limits

Request = tuple[int, Sequence[int], SamplingParams]


class _Queued(NamedTuple):
    request_id: int
    prompt: Sequence[int]
    output: Sequence[int]  # the tokens a resumed request already has
    params: SamplingParams


class PipelineDriver:
    """Owns an inbox for completions (its `endpoint` is the first stage's `driver` link) and, once `connect`
    is called, an outbox to the first stage. On secured links it talks only to the first stage's key and takes
    completions from it alone (a node's own head stage holds the node's key)."""

    def __init__(
        self, context: Context, bind: str = "tcp://127.0.0.1:*", security: LinkSecurity | None = None
    ) -> None:
        self._inbox = Inbox(context, bind, security=security)
        self._security = security
        self._first_stage_key: bytes | None = None
        self.dropped = 0  # completions from a peer other than the first stage
        self._context = context
        self._outbox: Outbox | None = None
        self._pending: set[int] = set()  # submitted, not completed
        self._done: dict[int, tuple[int, ...]] = {}  # completed, not yet asked for by `wait_for`

    @property
    def endpoint(self) -> str:
        return self._inbox.endpoint

    @property
    def pending(self) -> int:
        return len(self._pending)

    def connect(self, first_stage: str, first_stage_key: bytes | None = None) -> None:
        """Links to the first stage; on secured links `first_stage_key` is its key (default: our own, the
        node's head stage)."""
        if self._security is not None:
            self._first_stage_key = first_stage_key or self._security.keys.public
        self._outbox = Outbox(
            self._context, first_stage, security=self._security, server_key=self._first_stage_key
        )

    def submit(self, requests: Sequence[Request], resume: Mapping[int, Sequence[int]] | None = None) -> None:
        """Queues (request id, prompt token ids, sampling parameters) triples; ids must be unique among the
        requests still running. `resume` gives, by request id, the output tokens a request already has (it
        continues from them, and its completion's output starts with them)."""
        if len({r for r, _, _ in requests} | self._pending) != len(requests) + len(self._pending):
            raise ValueError("request ids must be unique among the running requests")
        resume = resume or {}
        batch: list[_Queued] = []
        tokens = 0
        for request_id, prompt, params in requests:
            output = resume.get(request_id, ())
            fed = len(prompt) + len(output)
            if batch and (len(batch) == SUBMIT_REQUESTS or tokens + fed > DEFAULT_LIMITS.max_tokens):
                self._send_submit(batch)
                batch, tokens = [], 0
            batch.append(_Queued(request_id, prompt, output, params))
            tokens += fed
        if batch:
            self._send_submit(batch)

    def _send_submit(self, batch: list[_Queued]) -> None:
        self._pending.update(q.request_id for q in batch)
        self._first_stage().send(
            *message(
                "submit",
                request_ids=tuple(q.request_id for q in batch),
                query_lens=tuple(len(q.prompt) + len(q.output) for q in batch),
                token_ids=tuple(t for q in batch for t in (*q.prompt, *q.output)),
                new_requests=tuple(RequestSpec(q.request_id, len(q.prompt), q.params) for q in batch),
            )
        )

    def completions(
        self, idle_timeout_s: float = 120.0, check: Callable[[], None] = lambda: None
    ) -> Iterator[Completion]:
        """Yields each submitted request's completion as it finishes, until none is pending. `check` runs
        whenever nothing arrives for a moment and raises to give up (a dead stage, a new assignment);
        TimeoutError if nothing finishes for `idle_timeout_s`."""
        for got in self._arrivals(lambda: bool(self._pending), idle_timeout_s, check):
            yield from got

    def wait_for(
        self, ids: Sequence[int], idle_timeout_s: float = 120.0, check: Callable[[], None] = lambda: None
    ) -> dict[int, tuple[int, ...]]:
        """The outputs of the requests `ids` (submitted earlier), once all have finished. Completions of other
        requests that arrive meanwhile are kept for their own wait. Gives up as `completions` does."""

        def waiting() -> bool:
            return not all(i in self._done for i in ids)

        for got in self._arrivals(waiting, idle_timeout_s, check):
            self._done.update((c.request_id, c.output) for c in got)
        return {i: self._done.pop(i) for i in ids}

    def _arrivals(
        self, waiting: Callable[[], bool], idle_timeout_s: float, check: Callable[[], None]
    ) -> Iterator[list[Completion]]:
        """The completions of each message that comes in while `waiting()`; `check` runs whenever nothing
        comes for a moment, and TimeoutError ends the wait after `idle_timeout_s` without a message."""
        last_progress = time.monotonic()
        while waiting():
            got = self._receive(check)
            if got is None:
                if time.monotonic() - last_progress > idle_timeout_s:
                    raise TimeoutError(f"no request finished in {idle_timeout_s:.0f} s")
                continue
            last_progress = time.monotonic()
            yield got

    def _receive(self, check: Callable[[], None]) -> list[Completion] | None:
        """The completions of the next message (None if none came for a moment)."""
        got = self._inbox.receive(timeout_ms=200)
        if got is None:
            check()
            return None
        if self._security is not None and got.sender != self._first_stage_key:
            self.dropped += 1
            return None
        header = got.header
        completed = []
        for request_id, prompt_len, output in zip(
            header.request_ids, header.positions, header.token_runs(), strict=True
        ):
            if request_id in self._pending:
                self._pending.remove(request_id)
                completed.append(Completion(request_id, prompt_len, tuple(output)))
        return completed

    def shutdown(self) -> None:
        """Asks the pipeline to stop once its work is done."""
        self._first_stage().send(*message("shutdown"))

    def _first_stage(self) -> Outbox:
        if self._outbox is None:
            raise RuntimeError("the driver is not connected to a first stage")
        return self._outbox

    def close(self) -> None:
        if self._outbox is not None:
            self._outbox.close()
            self._outbox = None
        self._inbox.close()
