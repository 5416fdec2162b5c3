"""The node loop: join, then until stopped: heartbeat, follow the assignment (serve its stage), claim and
serve work units when this node heads its pipeline, and sign the commitments of batches it served (after
checking them). Transient failures of the coordinator are logged and retried; they never stop the node."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from eth_account.signers.local import LocalAccount

from client_sdk.device import DeviceProfile
from client_sdk.errors import ContractRevert
from client_sdk.protocol.endpoint import tcp_connect_ms
from client_sdk.throttled_log import ThrottledLog
from miner.node.appeals import Appealer
from miner.node.challenges import Answerer
from miner.node.consent import Consenter, well_formed
from miner.node.coordinator_client import CoordinatorClient, CoordinatorError
from miner.node.executor import HeadExecutor, Started
from miner.node.journal import Journal, Served
from miner.node.links import listening
from miner.node.requests import SCRATCH_IDS, task_and_line
from miner.node.signer import RefusedToSign, Unrecorded, check_and_sign
from miner.node.stage_host import HostSettings, StageAssignment, StageHost
from miner.node.vouch import Voucher
from miner.pipeline.ledger import RequestRecord

log = logging.getLogger("batchmarket.miner")
UNITS_IN_FLIGHT = 2
# units whose results wait for the coordinator to answer again (at most UNITS_IN_FLIGHT more are served
# meanwhile; past this bound the oldest is given up and its lease runs out)
MAX_UNDELIVERED = 8
JOIN_RETRY_S = 1.0  # a coordinator not up yet is asked again this often
WAKE_WAIT_S = 25.0  # the longest wait for news, under the coordinator's bound (coordinator.api.wakes)
ASSIGNMENT_REFRESH_S = 30.0  # the assignment is read this often even without news (a lost wake)
READ_ANYWAY_S = 60.0  # and proposals, work and commitments to sign this often


class Reassigned(Exception):
    """The coordinator moved this node while it was serving a unit; the unit goes back to the coordinator."""


@dataclass(frozen=True)
class NodeRelay:
    """The relay a node behind NAT takes its peers' messages through, as it tells the coordinator."""

    endpoint: str
    key: str
    region: str


@dataclass(frozen=True)
class NodeConfig:
    model: str
    endpoint: str
    region: str
    chain_id: int
    task_registry: str
    heartbeat_s: float = 5.0
    poll_s: float = 0.5
    relay: NodeRelay | None = None


class Node:
    def __init__(
        self,
        config: NodeConfig,
        account: LocalAccount,
        client: CoordinatorClient,
        device: DeviceProfile,
        host: HostSettings,
        executor: HeadExecutor,
        journal: Journal,
        consenter: Consenter | None = None,
        voucher: Voucher | None = None,
        answerer: Answerer | None = None,
        appealer: Appealer | None = None,
        signer: LocalAccount | None = None,
    ) -> None:
        self.config = config
        self.consenter = consenter  # None: this node accepts no new task (it only finishes what it has)
        # None: this node leaves committing to its coordinator (without a chain connection it cannot vouch)
        self.voucher = voucher
        # None: this node leaves answering the owner's line challenges to its coordinator (no chain access)
        self.answerer = answerer
        # None: this node never appeals a conviction (no chain access, or a node made to corrupt its lines)
        self.appealer = appealer
        self._vouch_checked = 0.0
        self.account = account  # the miner: it authenticates to the coordinator and sends the transactions
        # the registered signer: it signs the commitments (None: the account is its own signer); a key apart
        # from the account, so that a leaked one can be revoked per task while the account and stake are safe
        self.signer = signer or account
        self.client = client
        self.device = device
        self.host = StageHost(host, self.journal_finished)
        self.executor = executor
        self.journal = journal
        # units in hand, each with its request ids: heartbeats keep their leases and report their progress
        self.serving: dict[int, list[int]] = {}
        self.refused: set[str] = set()  # batches we will not sign, so we do not re-check them every poll
        self.declined: set[tuple[str, int]] = set()  # proposals (batch, expiry) our consent policy refused
        self.wanted: StageAssignment | None = None  # the latest assignment the coordinator gave
        self.in_flight: deque[tuple[dict[str, Any], Started]] = deque()  # claimed units, oldest first
        # served units whose results the coordinator has not taken yet (it was unreachable), oldest first:
        # their units stay in hand, so heartbeats keep their leases, and they go when it answers again
        self.undelivered: deque[tuple[dict[str, Any], list[dict[str, Any]]]] = deque()
        self._warn = ThrottledLog(log)  # what peers can make this node log at will
        # units the coordinator took back while we served them (a stage of our pipeline restarted, so their
        # requests died with it): the loop gives them up instead of waiting for tokens that never come
        self.lost: set[int] = set()
        # set when there is something to read at the coordinator (its wake counter moved, the assignment
        # changed, or waits fail and the loop polls): the loop's idle wait ends
        self._news = threading.Event()
        # when the loop reads everything even without news: a wake can be lost (Redis down when it rang), and
        # a step put off (a signature waiting on its vouch) is tried again soon
        self._read_by = 0.0

    def run(self, stop: threading.Event) -> None:
        try:
            if not self._join(stop):
                return
            # heartbeats run beside the work: a unit can take longer to serve than the heartbeat expiry
            threading.Thread(target=self._beat, args=(stop,), daemon=True).start()
            # and so does the wait for news, which ends the loop's idle wait and follows the assignment
            threading.Thread(target=self._listen, args=(stop,), daemon=True).start()
            busy = True  # the first turn reads everything
            while not stop.is_set():
                now = time.monotonic()
                polls = busy or self._news.is_set() or bool(self.undelivered) or now >= self._read_by
                if polls:  # cleared before the turn reads: news that comes during it makes another
                    self._news.clear()
                    self._read_by = now + READ_ANYWAY_S
                try:
                    busy = self._step(polls)
                except CoordinatorError as exc:
                    log.warning("coordinator: %s", exc)
                    stop.wait(self.config.poll_s)
                    busy = True  # try again
                    continue
                if not busy:
                    self._idle(stop)
        finally:
            self.host.close()

    def _idle(self, stop: threading.Event) -> None:
        """Waits for news from the coordinator, the node being stopped, the next look at signed work, or the
        time to read everything anyway (the stop is checked every `poll_s`; no request is sent meanwhile)."""
        due = min(self._vouch_checked + self.config.heartbeat_s, self._read_by)
        while not stop.is_set() and (left := due - time.monotonic()) > 0:
            if self._news.wait(min(self.config.poll_s, left)):
                return

    def _step(self, polls: bool = True) -> bool:
        """One turn of the node's loop: follows the latest assignment, then (with `polls`: there is news, or
        the last turn did something) accepts, delivers, serves and signs what waits; True if it did
        anything."""
        if self.host.follow(self.wanted) and self.in_flight:
            # the units in flight were submitted to the stage just torn down (a new plan, or a stage rebuilt
            # while the coordinator was away): waiting for them would wait out the driver's idle timeout
            self._give_up("this node follows a new assignment")
        self._follow_signed_work()
        if not polls:
            return False
        return self._accept_proposals() | self._deliver() | self._serve_units() | self._sign_pending()

    def _listen(self, stop: threading.Event) -> None:
        """Long-polls the coordinator's wake counter; when it moves, reads the assignment and tells the loop.
        While waits fail (a coordinator away, or one without them), the loop is told every `poll_s`: it polls
        as if there were news."""
        client = self.client.clone()  # connection pools are not shared across threads
        seen: int | None = None
        try:
            while not stop.is_set():
                try:
                    asked = time.monotonic()
                    counter = client.wake(seen, WAKE_WAIT_S)
                    if counter != seen:
                        self._follow_assignment(client)
                        seen = counter
                        self._news.set()
                    elif time.monotonic() - asked < WAKE_WAIT_S / 2:
                        # no news long before the wait was up: the waits do not work (a proxy answering at
                        # once, a hostile coordinator); asking again at once would be a loop of signatures
                        raise CoordinatorError(200, "a wait came back early without news")
                except CoordinatorError as exc:
                    self._warn.warning("wake", "cannot wait for news, polling: %s", exc)
                    self._news.set()
                    stop.wait(self.config.poll_s)
        finally:
            client.close()

    def _follow_assignment(self, client: CoordinatorClient) -> None:
        """Reads the node's assignment; a change is news for the loop."""
        latest = client.assignment()
        try:
            wanted = StageAssignment.from_json(latest) if latest is not None else None
        except (KeyError, TypeError, ValueError) as exc:  # the threads that read it must go on
            why = f"unreadable assignment ({type(exc).__name__}): {latest!r:.200}"
            raise CoordinatorError(200, why) from exc
        if wanted != self.wanted:
            self.wanted = wanted
            self._news.set()

    def _follow_signed_work(self) -> None:
        """Once a heartbeat interval: the voucher's look at the tasks this node signed and the coordinator has
        not committed yet, the answerer's at the owner's challenges of the lines of those it signed, and the
        appealer's at their disputes (here, in the loop that sends this miner's other transactions)."""
        now = time.monotonic()
        if now - self._vouch_checked < self.config.heartbeat_s:
            return
        self._vouch_checked = now
        followers = (("vouch", self.voucher), ("answer", self.answerer), ("appeal", self.appealer))
        for name, follower in followers:
            if follower is None:
                continue
            try:
                follower.check()
            except (ContractRevert, OSError, ValueError) as exc:  # the chain is away or refused: next time
                self._warn.warning(name, "following signed results on-chain: %s", exc)

    def _join(self, stop: threading.Event) -> bool:
        """Joins, listening on this node's address meanwhile unless it is behind a relay, so the coordinator's
        reachability probe finds what its peers will find; says how its peers reach it. A coordinator that
        cannot be reached or is not ready yet (started after this node, or restarting) is asked again every
        JOIN_RETRY_S until `stop`; any other refusal raises. False if stopped before joining."""
        keys = self.host.settings.link_keys
        link_key = keys.public.decode() if keys is not None else ""
        config = self.config
        relay = dataclasses.asdict(config.relay) if config.relay is not None else None
        waiting = ThrottledLog(log, interval_s=60.0)
        while True:
            try:
                with contextlib.ExitStack() as stack:
                    if relay is None:
                        stack.enter_context(listening(self.host.settings.listen))
                    answer = self.client.join(
                        config.model, config.endpoint, link_key, config.region, self.device.as_dict(), relay
                    )
                break
            except CoordinatorError as exc:
                if exc.status != 0 and exc.status < 500:
                    raise
                waiting.warning("join", "waiting for the coordinator: %s", exc)
                if stop.wait(JOIN_RETRY_S):
                    return False
        log.info("joined as %s", self.account.address)
        if config.relay is not None:
            log.info("peers reach this node through the relay at %s", config.relay.endpoint)
        elif answer.get("reachable", True):
            log.info("directly reachable at %s", config.endpoint)
        else:
            log.warning(
                "the coordinator cannot reach %s: peers cannot send to this node, so it only serves a whole "
                "model alone. Forward that port to this machine, or serve through a relay (--relay)",
                config.endpoint,
            )
        return True

    def _beat(self, stop: threading.Event) -> None:
        """Heartbeats, with the progress of the units in hand, and now and then the assignment (each change of
        it also wakes `_listen`, which reads it at once; both run beside the loop, so a node busy with a unit
        still notices that its pipeline is gone)."""
        client = self.client.clone()  # connection pools are not shared across threads
        followed = time.monotonic()
        try:
            while not stop.is_set():
                try:
                    driver = self.host.driver
                    queued = driver.pending if driver is not None else 0  # requests in flight at the head
                    rtt = self._measure_link()
                    relay = self.config.relay
                    relay_rtt = tcp_connect_ms(relay.endpoint) if relay is not None else None
                    units = list(self.serving)
                    beat = client.heartbeat(self.device.layer_latency_ms, queued, units, rtt, relay_rtt)
                    self.lost.update(beat)
                    self._report_progress(client)
                    if time.monotonic() - followed >= ASSIGNMENT_REFRESH_S:  # in case a wake was lost
                        self._follow_assignment(client)
                        followed = time.monotonic()
                except CoordinatorError as exc:
                    log.warning("heartbeat: %s", exc)
                stop.wait(self.config.heartbeat_s)
        finally:
            client.close()

    def _report_progress(self, client: CoordinatorClient) -> None:
        """Tells the coordinator each unit's unfinished lines' output tokens so far: should this node die, the
        pipeline its units go to resumes those lines from there instead of from their prompts."""
        snapshot = self.host.progress()
        for unit_id, requests in dict(self.serving).items():  # a copy: the node's loop changes the original
            lines = [
                {"index": task_and_line(r)[1], "output_token_ids": list(snapshot[r])}
                for r in requests
                if r in snapshot
            ]
            if not lines:
                continue
            try:
                client.progress(unit_id, lines)
            except CoordinatorError as exc:  # e.g. the unit's results just went in: nothing left to resume
                log.warning("progress of unit %s: %s", unit_id, exc)
                if exc.code == "lease_lost":
                    self.lost.add(unit_id)

    def _measure_link(self) -> dict[str, float]:
        """The round trip to the stage this node sends to, by miner address (the router's link latency)."""
        assignment = self.host.assignment
        peer = assignment.sends_to if assignment is not None else None
        if peer is None:
            return {}
        miner, endpoint = peer
        rtt = tcp_connect_ms(endpoint)
        return {} if rtt is None else {miner: rtt}

    def journal_finished(self, request: int, record: RequestRecord) -> None:
        """A finished request of this node's stage (not the head): journaled, so this node can check the line
        before signing it."""
        if request >= SCRATCH_IDS:
            return
        task_id, index = task_and_line(request)
        if not self.journal.covers(task_id, index):  # a peer can name any task and line
            self._warn.warning(
                "foreign",
                "not journaling task %d line %d: not a line of a task this node took",
                task_id,
                index,
            )
            return
        served = Served(tuple(record.prompt), tuple(record.output), self._layers())
        if not self.journal.record(task_id, index, served):
            self._warn.warning(
                "differs",
                "task %d line %d finished again with other tokens: the first record stands",
                task_id,
                index,
            )

    def _layers(self) -> int:
        """How many model layers this node's stage runs (0 while it has no stage)."""
        assignment = self.host.assignment
        return assignment.end - assignment.start if assignment is not None else 0

    def _check_assignment(self) -> None:
        self.host.check()
        if self.wanted != self.host.assignment:
            raise Reassigned("the coordinator changed this node's assignment")
        taken = self.lost & set(self.serving)
        self.lost -= self.lost - set(self.serving)  # forget units no longer in hand
        if taken:
            raise Reassigned(f"the coordinator took back units {sorted(taken)}")

    def _serve_units(self) -> bool:
        """Keeps UNITS_IN_FLIGHT units at the head (so the pipeline does not drain at a unit's end), and
        returns the oldest one's results once they are all in."""
        driver = self.host.driver
        if driver is None:
            return False
        claimed = False
        while len(self.in_flight) < UNITS_IN_FLIGHT and (unit := self.client.claim()) is not None:
            claimed = True
            try:
                started = self.executor.start(int(unit["task_id"]), unit["lines"], driver)
            except ValueError as exc:  # its lease runs out and the coordinator retries it elsewhere
                log.error("cannot serve unit %s: %s", unit["unit_id"], exc)
                continue
            self.serving[int(unit["unit_id"])] = started.ids
            self.in_flight.append((unit, started))
        if not self.in_flight:
            return claimed
        unit, started = self.in_flight[0]
        try:
            served = self.executor.finish(started, driver, self._check_assignment)
        except (Reassigned, RuntimeError, TimeoutError) as exc:
            self.host.stop()  # the pipeline's state is unknown: the next loop builds it afresh
            self._give_up(str(exc))
            return True
        self.in_flight.popleft()
        self._report(unit, served)
        return True

    def _report(self, unit: dict[str, Any], served: list[tuple[int, Served]]) -> None:
        task_id = int(unit["task_id"])
        reader = self.executor.reader
        results = []
        layers = self._layers()
        for index, line in served:
            # journaled before anyone hears of it: we sign from the journal, even after a crash
            self.journal.record(task_id, index, dataclasses.replace(line, layers=layers))
            results.append(
                {
                    "index": index,
                    "text": reader.text(line.output),
                    "output_token_ids": list(line.output),
                    "prompt_tokens": len(line.prompt),
                    "finish_reason": reader.finish_reason(line.output),
                }
            )
        self.undelivered.append((unit, results))
        if len(self.undelivered) > MAX_UNDELIVERED:
            given_up, _ = self.undelivered.popleft()
            self.serving.pop(int(given_up["unit_id"]), None)
            log.warning(
                "gave up the results of unit %s: the coordinator has not answered", given_up["unit_id"]
            )
        self._deliver()

    def _give_up(self, why: str) -> None:
        """Drops the units in flight (not those whose results wait for delivery) and gives them back."""
        given_up = sorted(self.serving.keys() - {int(unit["unit_id"]) for unit, _ in self.undelivered})
        log.warning("gave up units %s: %s", given_up, why)
        self.in_flight.clear()
        self.lost.clear()
        for unit_id in given_up:
            del self.serving[unit_id]
        self._give_back(given_up)

    def _give_back(self, unit_ids: list[int]) -> None:
        """Tells the coordinator at once (if it answers) that these units are given up: they go on to another
        pipeline now, not when their leases run out."""
        if not unit_ids:
            return
        try:
            self.client.give_back(unit_ids)
        except CoordinatorError as exc:  # their leases run out instead
            log.warning("could not give back units %s: %s", unit_ids, exc)

    def _deliver(self) -> bool:
        """Sends the served units' results the coordinator has not taken yet, oldest first; stops at the first
        it cannot reach (a transport error or a 5xx: they are kept for the next try). True if any went."""
        delivered = False
        while self.undelivered:
            unit, results = self.undelivered[0]
            unit_id = int(unit["unit_id"])
            try:
                stored = self.client.submit(unit_id, results)
            except CoordinatorError as exc:
                if exc.status == 0 or exc.status >= 500:
                    log.warning("unit %s: results kept until the coordinator answers (%s)", unit_id, exc)
                    return delivered
                log.warning("unit %s: results refused: %s", unit_id, exc)  # e.g. its lease ran out
            else:
                log.info(
                    "unit %s of %s: %d lines, %d stored", unit_id, unit["batch_id"], len(results), stored
                )
            self.undelivered.popleft()
            self.serving.pop(unit_id, None)
            delivered = True
        return delivered

    def _accept_proposals(self) -> bool:
        """Accepts the proposed assignments its consent policy allows (each refusal logged once)."""
        if self.consenter is None:
            return False
        accepted = False
        for proposal in self.client.proposals():
            if not well_formed(proposal):
                self._warn.warning(
                    "proposal", "skipping a malformed proposal of the coordinator's: %.200r", proposal
                )
                continue
            key = (proposal["batch_id"], proposal["expiry"])
            if key in self.declined:
                continue
            reason = self.consenter.refusal(proposal)
            if reason is not None:
                log.warning("not accepting batch %s: %s", proposal["batch_id"], reason)
                self.declined.add(key)
                continue
            # noted before the coordinator hears of it: once it does, the task's lines may reach this stage
            self.journal.accept(int(proposal["task_id"]), self.consenter.lines(proposal))
            try:
                self.client.accept(proposal["batch_id"], self.consenter.sign(proposal).signature)
            except CoordinatorError as exc:
                if exc.status == 0 or exc.status >= 500:
                    raise  # the coordinator is away: the next turn asks again
                # refused for good (another signer registered since this node started, an expired
                # proposal): declined, so that the node's other work goes on
                log.warning("not accepting batch %s: the coordinator refused: %s", proposal["batch_id"], exc)
                self.declined.add(key)
                continue
            log.info("accepted task %s with a stake lock of %s", proposal["task_id"], proposal["stake_lock"])
            accepted = True
        return accepted

    def _sign_pending(self) -> bool:
        signed = False
        for request in self.client.pending_signatures():
            if request["batch_id"] in self.refused:
                continue
            try:
                checked = check_and_sign(
                    self.signer,
                    self.account.address,
                    request,
                    self.journal.served,
                    self.executor.reader,
                    self.config.chain_id,
                    self.config.task_registry,
                )
            except Unrecorded as exc:  # the coordinator serves them again and asks anew
                log.warning(
                    "not signing batch %s yet: %s; asking for them to be served again",
                    request["batch_id"],
                    exc,
                )
                self.client.unrecorded(request["batch_id"], exc.lines)
                continue
            except (RefusedToSign, KeyError, ValueError) as exc:
                log.error("not signing batch %s: %s", request["batch_id"], exc)
                self.refused.add(request["batch_id"])
                continue
            if self.voucher is not None:
                try:
                    self.voucher.signed(checked.commitment)
                except (ContractRevert, OSError) as exc:  # not handed over before the vouch lands: soon again
                    self._warn.warning(
                        "vouch", "batch %s: vouching on-chain first: %s", request["batch_id"], exc
                    )
                    self._read_by = min(self._read_by, time.monotonic() + self.config.poll_s)
                    continue
            if self.answerer is not None:
                self.answerer.signed(checked.commitment.task_id, checked.trees)
            self.client.sign(request["batch_id"], checked.signature)
            log.info("signed the results of batch %s", request["batch_id"])
            signed = True
        return signed
