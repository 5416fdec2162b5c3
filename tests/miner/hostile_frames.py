"""What a hostile peer of a stage builds: frames (always round-tripped through the real wire encoder and
decoder, so every one passes `frames.decode`'s checks), a bare stage worker driven by hand, and an outbox
that proves a real peer's link key (as a hostile peer holds its own)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import torch
import zmq

from client_sdk.protocol.sampling import SamplingParams
from miner.model.shard import StageShard
from miner.pipeline.stage import CacheSettings, Links, StageWorker
from miner.transport.frames import Header, RequestSpec, decode, encode, message
from miner.transport.link import Inbox, Outbox
from miner.transport.security import LinkKeys, LinkSecurity

HIDDEN = 64  # the tiny model's hidden size
CACHE = CacheSettings(local_pages=64, max_seqs=8)

Context = zmq.Context[zmq.Socket[bytes]]


def wire(header: Header, tensor: torch.Tensor) -> tuple[Header, torch.Tensor]:
    """What the receiving inbox hands the stage: the message as encoded and decoded (validated)."""
    return decode(encode(header, tensor))


def spec(request_id: int, prompt_len: int = 1, max_tokens: int = 4) -> RequestSpec:
    return RequestSpec(request_id, prompt_len, SamplingParams(max_tokens=max_tokens))


def activations(epoch: tuple[int, int], microbatch: int = 0, **fields: object) -> tuple[Header, torch.Tensor]:
    """A well-formed activations message with one zero hidden-state row per fed token."""
    fed = len(fields.get("token_ids", ()))  # type: ignore[arg-type]
    return wire(
        *message(
            "activations",
            microbatch,
            tensor=torch.zeros(fed, HIDDEN),
            epoch=epoch,
            **fields,  # type: ignore[arg-type]
        )
    )


@contextlib.contextmanager
def bare_stage(
    checkpoint: Path, start: int, end: int, plan_version: int = 1, **kwargs: object
) -> Iterator[tuple[StageWorker, Inbox]]:
    """A non-head stage worker on plain links, its outgoing messages (to the next stage or the head) landing
    in a sink inbox the test can read."""
    context: Context = zmq.Context()
    sink = Inbox(context, "tcp://127.0.0.1:*")
    worker = StageWorker(
        StageShard.load(checkpoint, start, end),
        CACHE,
        context,
        plan_version=plan_version,
        **kwargs,  # type: ignore[arg-type]
    )
    try:
        if worker.shard.is_last:
            worker.connect(Links(first_stage=sink.endpoint))
        else:
            worker.connect(Links(next_stage=sink.endpoint))
        yield worker, sink
    finally:
        worker.close()
        sink.close()
        context.destroy(linger=0)


@contextlib.contextmanager
def impersonating(keys: LinkKeys, endpoint: str, server_key: bytes) -> Iterator[Outbox]:
    """An outbox that proves `keys` (a peer's link key pair, as a hostile peer holds its own) to the inbox at
    `endpoint`."""
    context: Context = zmq.Context()
    security = LinkSecurity(context, keys)
    outbox = Outbox(context, endpoint, security=security, server_key=server_key)
    try:
        yield outbox
    finally:
        outbox.close()
        security.stop()
        context.destroy(linger=0)
