"""Miner nodes' stages in one test process: each stage a StageHost (its own thread and ZeroMQ inbox on a
localhost port), wired by an assignment exactly as `miner serve` wires them from the coordinator's; with
`secured`, each host has its own link keys and the assignments carry them, as the coordinator's do."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path

from client_sdk.chain.anvil import free_port
from client_sdk.errors import UserError
from miner.model.config import ModelConfig
from miner.node.requests import Reader
from miner.node.stage_host import HostSettings, StageAssignment, StageHost
from miner.pipeline.batch import load_tokenizer, stop_token_ids
from miner.pipeline.head import STALL_S
from miner.pipeline.ledger import RequestRecord
from miner.pipeline.stage import CacheSettings, FinishedSink
from miner.transport.security import LinkKeys

CACHE = CacheSettings(local_pages=64, max_seqs=8)


def reader_for(checkpoint: Path) -> Reader:
    tokenizer = load_tokenizer(checkpoint)
    return Reader(tokenizer, ModelConfig.load(checkpoint), stop_token_ids(tokenizer, checkpoint))


def endpoints(count: int) -> tuple[str, ...]:
    return tuple(f"tcp://127.0.0.1:{free_port()}" for _ in range(count))


def assignments(
    splits: Sequence[tuple[int, int]], where: tuple[str, ...], keys: tuple[bytes, ...] = ()
) -> list[StageAssignment]:
    return [
        StageAssignment(1, 1, i, start, end, where, link_keys=keys) for i, (start, end) in enumerate(splits)
    ]


def ignore(_request: int, _record: RequestRecord) -> None:
    pass


@contextlib.contextmanager
def stage_hosts(
    checkpoint: Path,
    splits: Sequence[tuple[int, int]],
    sinks: Sequence[FinishedSink] | None = None,
    secured: bool = False,
    cache: CacheSettings = CACHE,
    stall_s: float = STALL_S,
) -> Iterator[list[StageHost]]:
    """One host per stage, serving the pipeline `splits` describes; the first one holds the driver. A port
    that was free when picked may be taken before a host binds it (the OS hands the same ephemeral range to
    every outgoing connection of the other tests): the pipeline is then set up again on fresh ports."""
    for attempt in range(PORT_ATTEMPTS):
        try:
            hosts = _hosts(checkpoint, splits, sinks, secured, cache, stall_s)
            break
        except _PortTaken:
            if attempt == PORT_ATTEMPTS - 1:
                raise
    try:
        yield hosts
    finally:
        for host in hosts:
            host.close()


PORT_ATTEMPTS = 3


class _PortTaken(Exception):
    """A host's port was taken between picking it and binding it."""


def _hosts(
    checkpoint: Path,
    splits: Sequence[tuple[int, int]],
    sinks: Sequence[FinishedSink] | None,
    secured: bool,
    cache: CacheSettings,
    stall_s: float,
) -> list[StageHost]:
    where = endpoints(len(splits))
    keys = [LinkKeys.generate() if secured else None for _ in splits]
    hosts = [
        StageHost(
            HostSettings(checkpoint, endpoint, cache, link_keys=keys[i], stall_s=stall_s),
            sinks[i] if sinks else ignore,
        )
        for i, endpoint in enumerate(where)
    ]
    published = tuple(k.public for k in keys if k is not None)
    try:
        for host, assignment in zip(hosts, assignments(splits, where, published), strict=True):
            host.follow(assignment)
    except UserError as exc:
        for host in hosts:
            host.close()
        if "the address is in use" in str(exc):
            raise _PortTaken(str(exc)) from exc
        raise
    return hosts
