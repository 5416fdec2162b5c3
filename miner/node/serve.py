"""The node loop: join, then until stopped: heartbeat, follow the assignment, claim and serve work units as a
pipeline head, and sign the commitments of batches it served (after checking them). Transient failures of the
coordinator are logged and retried; they never stop the node."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eth_account.signers.local import LocalAccount

from client_sdk.device import DeviceProfile
from miner.node.coordinator_client import CoordinatorClient, CoordinatorError
from miner.node.executor import WholeModelExecutor
from miner.node.journal import Journal
from miner.node.signer import RefusedToSign, check_and_sign

log = logging.getLogger("batchmarket.miner")


@dataclass(frozen=True)
class NodeConfig:
    model: str
    model_dir: Path
    endpoint: str
    region: str
    chain_id: int
    task_registry: str
    heartbeat_s: float = 5.0
    poll_s: float = 0.5


class Node:
    def __init__(
        self,
        config: NodeConfig,
        account: LocalAccount,
        client: CoordinatorClient,
        device: DeviceProfile,
        load_executor: Callable[[Path], WholeModelExecutor],
        journal: Journal,
    ) -> None:
        self.config = config
        self.account = account
        self.client = client
        self.device = device
        self.load_executor = load_executor
        self.journal = journal
        self.executor: WholeModelExecutor | None = None
        self.serving: set[int] = set()  # units in hand: heartbeats keep their leases
        self.refused: set[str] = set()  # batches we will not sign, so we do not re-check them every poll
        self.units_served = 0

    def run(self, stop: threading.Event) -> None:
        self.client.join(self.config.model, self.config.endpoint, self.config.region, self.device.as_dict())
        log.info("joined as %s", self.account.address)
        # heartbeats run beside the work: a unit can take longer to serve than the heartbeat expiry
        beats = threading.Thread(target=self._beat, args=(stop,), daemon=True)
        beats.start()
        next_check = 0.0
        while not stop.is_set():
            try:
                if time.monotonic() >= next_check:
                    self._follow(self.client.assignment())
                    next_check = time.monotonic() + self.config.heartbeat_s
                busy = self._serve_one() | self._sign_pending()
            except CoordinatorError as exc:
                log.warning("coordinator: %s", exc)
                busy = False
            if not busy:
                stop.wait(self.config.poll_s)

    def _beat(self, stop: threading.Event) -> None:
        client = self.client.clone()  # connection pools are not shared across threads
        try:
            while not stop.is_set():
                try:
                    serving = list(self.serving)
                    client.heartbeat(self.device.layer_latency_ms, len(serving), serving)
                except CoordinatorError as exc:
                    log.warning("heartbeat: %s", exc)
                stop.wait(self.config.heartbeat_s)
        finally:
            client.close()

    def _follow(self, assignment: dict[str, Any] | None) -> None:
        if assignment is None:
            return
        if len(assignment["stages"]) != 1:
            log.error(
                "assigned a stage of a %d-stage pipeline: this node serves whole-model pipelines only",
                len(assignment["stages"]),
            )
            return
        if self.executor is None:
            self.executor = self.load_executor(self.config.model_dir)
            log.info("loaded %s, layers [%d, %d)", self.config.model, assignment["start"], assignment["end"])

    def _serve_one(self) -> bool:
        if self.executor is None:
            return False
        unit = self.client.claim()
        if unit is None:
            return False
        unit_id, task_id, created = int(unit["unit_id"]), int(unit["task_id"]), int(unit["created"])
        self.serving.add(unit_id)
        try:
            results = []
            for index, produced in self.executor.run(unit["lines"]):
                # journaled before anyone hears of it: we sign from the journal, even after a crash
                self.journal.record(task_id, index, created, produced)
                results.append(
                    {
                        "index": index,
                        "text": produced.text,
                        "output_token_ids": list(produced.output),
                        "prompt_tokens": len(produced.prompt),
                        "finish_reason": produced.finish_reason,
                    }
                )
            stored = self.client.submit(unit_id, results)
        finally:
            self.serving.discard(unit_id)
        self.units_served += 1
        log.info(
            "unit %s of %s: %d lines, %d stored", unit["unit_id"], unit["batch_id"], len(results), stored
        )
        return True

    def _sign_pending(self) -> bool:
        signed = False
        for request in self.client.pending_signatures():
            if request["batch_id"] in self.refused:
                continue
            try:
                signature = check_and_sign(
                    self.account,
                    request,
                    self.journal.produced,
                    self.journal.created,
                    self.config.chain_id,
                    self.config.task_registry,
                )
            except (RefusedToSign, KeyError) as exc:
                log.error("not signing batch %s: %s", request["batch_id"], exc)
                self.refused.add(request["batch_id"])
                continue
            self.client.sign(request["batch_id"], signature)
            log.info("signed the results of batch %s", request["batch_id"])
            signed = True
        return signed
