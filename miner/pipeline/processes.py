"""Runs an N-stage pipeline as N local processes and drives it: submit requests, stream back completions
(the in-process reference, every stage in one process with no transport, is miner.engine.in_process).

Each stage process loads its shard, binds its inbox on a free localhost port and reports the endpoint over a
pipe; the driver then tells every stage where to send (next stage, the ring back to the first, the driver),
waits until all are ready, and talks to the first stage over ZeroMQ like any other peer would. Closing sends
a shutdown down the pipeline, collects each stage's report (counters and per-request token records) and
makes sure no process outlives the driver. With `secured`, the links speak CURVE as miner nodes' do: the
driver makes each stage's key pair (so its relay knows the stages it serves), each stage reports its public
key with its endpoint, and the wiring names every peer's key; the driver controls the first stage and each
stage the next (the shutdown travels down the pipeline). The stages named in `relayed` act as if behind NAT:
their inbox listens on a port no peer is told, and dials a relay that the driver runs, through which their
peers send to them.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import multiprocessing
import os
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

import msgpack
import torch
import zmq

from client_sdk.errors import UserError
from miner.model.dtypes import DTYPES
from miner.model.shard import StageShard
from miner.pipeline.driver import PipelineDriver, Request
from miner.pipeline.head import Completion
from miner.pipeline.stage import CacheSettings, Links, PeerKeys, StageWorker
from miner.transport.relay import Relay, RelayAddress
from miner.transport.relay_admission import Admission, RelayMembers
from miner.transport.security import LinkKeys, LinkSecurity


def even_split(num_layers: int, stages: int) -> list[tuple[int, int]]:
    """Contiguous layer ranges, as equal as possible (earlier stages take the remainder)."""
    if not 1 <= stages <= num_layers:
        raise UserError(f"cannot split {num_layers} layers into {stages} stages")
    size, extra = divmod(num_layers, stages)
    bounds = [0]
    for stage in range(stages):
        bounds.append(bounds[-1] + size + (stage < extra))
    return list(itertools.pairwise(bounds))


@dataclass(frozen=True)
class StageSpec:
    model_dir: str
    start: int
    end: int
    cache: CacheSettings
    dtype: str = "float32"
    device: str = "cpu"
    attention: str = "auto"
    threads: int = 1  # torch threads of the stage (StageProcesses gives each its share of the cores)
    link_keys: LinkKeys | None = None  # CURVE links under this key pair (None: plain links)
    relay: tuple[str, bytes] | None = None  # (endpoint, key) of the relay this stage takes messages through


def _relay(address: list[Any] | tuple[str, bytes] | None) -> RelayAddress | None:
    return RelayAddress(str(address[0]), bytes(address[1])) if address is not None else None


def stage_process(spec: StageSpec, conn: Connection) -> None:
    """Entry point of a stage process: load, report the endpoint, wait for the wiring, serve, report."""
    logging.basicConfig(level=logging.WARNING, format="stage %(process)d: %(levelname)s %(message)s")
    torch.set_num_threads(spec.threads)
    try:
        shard = StageShard.load(
            Path(spec.model_dir), spec.start, spec.end, DTYPES[spec.dtype], spec.device, spec.attention
        )
    except UserError as exc:
        conn.send_bytes(msgpack.packb({"error": str(exc)}))
        return
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    security = LinkSecurity(context, spec.link_keys) if spec.link_keys is not None else None
    worker = StageWorker(shard, spec.cache, context, security=security, relay=_relay(spec.relay))
    try:
        key = security.keys.public if security is not None else None
        conn.send_bytes(msgpack.packb({"endpoint": worker.inbox.endpoint, "key": key}))
        wiring = msgpack.unpackb(conn.recv_bytes())
        keys = PeerKeys(**wiring["keys"]) if wiring["keys"] is not None else None
        if security is not None and keys is not None:
            security.allow(keys.senders())
        relays = {link: _relay(wiring[link]) for link in ("next_relay", "first_relay")}
        worker.connect(Links(**{**wiring, **relays, "route": tuple(wiring["route"]), "keys": keys}))
        conn.send_bytes(msgpack.packb({"ready": True}))
        worker.serve(keep_going=lambda: not conn.poll())  # the driver closing the pipe stops us too
        conn.send_bytes(msgpack.packb(worker.report()))
    except (EOFError, BrokenPipeError):
        pass  # the driver is gone; nobody to report to
    finally:
        worker.close()
        if security is not None:
            security.stop()
        context.term()


@dataclass
class StageProcesses:
    """A local pipeline of one process per stage. Use as a context manager."""

    model_dir: Path
    splits: Sequence[tuple[int, int]]
    cache: CacheSettings = field(default_factory=CacheSettings)
    latency_ms: float = 0.0
    dtype: str = "float32"
    device: str = "cpu"
    attention: str = "auto"
    secured: bool = False  # CURVE links, as between miner nodes
    relayed: frozenset[int] = frozenset()  # stages behind NAT, reached through a relay (needs `secured`)
    relay_latency_ms: float = 0.0  # injected at the relay, on top of `latency_ms` (a far relay)
    threads: int | None = None  # torch threads per stage; None: the machine's cores split between the stages
    start_timeout_s: float = 120.0
    reports: list[dict[str, Any]] = field(default_factory=list, init=False)
    _started: bool = field(default=False, init=False)

    def __enter__(self) -> StageProcesses:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        # forkserver: each stage forks from a server that imported torch once, without torch's threads running
        if self.relayed and not self.secured:
            raise UserError("only a secured pipeline can reach stages through a relay")
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["miner.pipeline.processes"])
        self._processes: list[BaseProcess] = []
        self._pipes: list[Connection] = []
        stage_keys = [LinkKeys.generate() if self.secured else None for _ in self.splits]
        self._start_relay(stage_keys)
        for index, (start, end) in enumerate(self.splits):
            spec = StageSpec(
                str(self.model_dir),
                start,
                end,
                self.cache,
                self.dtype,
                self.device,
                self.attention,
                threads=self.threads or stage_threads(len(self.splits)),
                link_keys=stage_keys[index],
                relay=self._relay_of(index),
            )
            parent, child = context.Pipe()
            process = context.Process(target=stage_process, args=(spec, child), daemon=True)
            process.start()
            child.close()
            self._processes.append(process)
            self._pipes.append(parent)
        self._zmq = zmq.Context()
        self._security = LinkSecurity(self._zmq, LinkKeys.generate()) if self.secured else None
        self._driver = PipelineDriver(self._zmq, security=self._security)
        try:
            started = [self._receive(i) for i in range(len(self.splits))]
            endpoints = [s["endpoint"] for s in started]
            keys = [s["key"] for s in started]
            last = len(endpoints) - 1
            for i, pipe in enumerate(self._pipes):
                links = {
                    "next_stage": endpoints[i + 1] if i < last else None,
                    "first_stage": endpoints[0] if i == last and last > 0 else None,
                    "driver": self._driver.endpoint if i == 0 else None,
                    "route": endpoints,
                    "latency_ms": self.latency_ms,
                    "keys": self._peer_keys(keys, i) if self._security is not None else None,
                    "next_relay": self._relay_of(i + 1) if i < last else None,
                    "first_relay": self._relay_of(0) if i == last and last > 0 else None,
                }
                pipe.send_bytes(msgpack.packb(links))
            for i in range(len(self._pipes)):
                self._receive(i)
        except BaseException:
            self._terminate()
            raise
        self.endpoints: list[str] = endpoints  # each stage's inbox, first stage first
        if self._security is not None:
            self._security.allow([keys[0]])
        self._driver.connect(endpoints[0], keys[0])
        self._started = True

    def _start_relay(self, stage_keys: list[LinkKeys | None]) -> None:
        """The relay of the stages in `relayed`, serving exactly these stages."""
        self.relay: Relay | None = None
        if not self.relayed:
            return
        public = [keys.public for keys in stage_keys if keys is not None]
        relayed = frozenset(public[i] for i in self.relayed)
        admission = Admission(RelayMembers(relayed=relayed, senders=frozenset(public)), fixed=True)
        self.relay = Relay(
            LinkKeys.generate(), "tcp://127.0.0.1:*", admission, latency_ms=self.relay_latency_ms
        )
        self._relay_thread = threading.Thread(target=self.relay.serve, daemon=True, name="relay")
        self._relay_thread.start()

    def _relay_of(self, stage: int) -> tuple[str, bytes] | None:
        """(endpoint, key) of the relay stage `stage` takes its messages through; None if it takes them
        directly."""
        if self.relay is None or stage not in self.relayed:
            return None
        return self.relay.address.endpoint, self.relay.address.key

    def _peer_keys(self, keys: list[bytes], i: int) -> dict[str, bytes | None]:
        """Stage i's peers' keys, as the wiring sends them; its controller is the driver (the first stage) or
        the stage before it."""
        assert self._security is not None
        last = len(keys) - 1
        return {
            "own": self._security.keys.public if i == 0 else keys[i - 1],
            "previous_stage": keys[i - 1] if i > 0 else None,
            "next_stage": keys[i + 1] if i < last else None,
            "last_stage": keys[last] if i == 0 and last > 0 else None,
            "first_stage": keys[0] if i == last and last > 0 else None,
        }

    def _receive(self, stage: int) -> dict[str, Any]:
        pipe = self._pipes[stage]
        if not pipe.poll(self.start_timeout_s):
            raise UserError(f"stage {stage} did not start within {self.start_timeout_s:.0f} s")
        try:
            reply: dict[str, Any] = msgpack.unpackb(pipe.recv_bytes())
        except EOFError:
            self._processes[stage].join(5.0)  # the pipe closes just before the process ends
            raise UserError(f"stage {stage} exited with code {self._processes[stage].exitcode}") from None
        if "error" in reply:
            raise UserError(f"stage {stage}: {reply['error']}")
        return reply

    def submit(self, requests: Sequence[Request]) -> None:
        """Queues (request id, prompt token ids, sampling parameters) triples; ids must be unique."""
        self._driver.submit(requests)

    @property
    def pending(self) -> int:
        return self._driver.pending

    @property
    def pids(self) -> list[int | None]:
        return [process.pid for process in self._processes]

    @property
    def exitcodes(self) -> list[int | None]:
        """Each stage process's exit code (None while it runs)."""
        return [process.exitcode for process in self._processes]

    def completions(self, idle_timeout_s: float = 120.0) -> Iterator[Completion]:
        """Yields each submitted request's completion as it finishes, until none is pending. Raises if a stage
        process dies or nothing finishes for `idle_timeout_s`."""
        return self._driver.completions(idle_timeout_s, self._check_alive)

    def _check_alive(self) -> None:
        dead = [i for i, p in enumerate(self._processes) if not p.is_alive()]
        if dead:
            raise RuntimeError(f"stage {dead[0]} exited with code {self._processes[dead[0]].exitcode}")

    def run(self, requests: Sequence[Request]) -> dict[int, tuple[int, ...]]:
        """Submits `requests` and waits for all of them; request id -> generated token ids."""
        self.submit(requests)
        return {c.request_id: c.output for c in self.completions()}

    def close(self, timeout_s: float = 30.0) -> list[dict[str, Any]]:
        """Shuts the pipeline down after its work and returns each stage's report, first stage first."""
        if not self._started:
            return self.reports
        self._driver.shutdown()
        deadline = time.monotonic() + timeout_s
        reports = []
        for pipe in self._pipes:
            if pipe.poll(max(0.0, deadline - time.monotonic())):
                with contextlib.suppress(EOFError):
                    reports.append(msgpack.unpackb(pipe.recv_bytes()))
        self.reports = reports
        self._terminate(deadline)
        return reports

    def _terminate(self, deadline: float | None = None) -> None:
        for pipe in self._pipes:
            pipe.close()  # a stage still serving sees the pipe close and stops
        for process in self._processes:
            process.join(max(0.0, deadline - time.monotonic()) if deadline else 5.0)
            if process.is_alive():
                process.terminate()
                process.join(5.0)
            if process.is_alive():
                process.kill()
                process.join()
        self._started = False
        self._driver.close()
        if self._security is not None:
            self._security.stop()
        self._zmq.term()
        if self.relay is not None:
            self.relay.stop()
            self._relay_thread.join()
            self.relay.close()
            self.relay = None


def stage_threads(stages: int) -> int:
    """Torch threads per stage when `stages` stages (processes or miner nodes) share this machine: its usable
    cores split evenly, at least one each (one stage on two cores computes on both)."""
    return max(1, len(os.sched_getaffinity(0)) // stages)
