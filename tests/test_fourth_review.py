"""Fourth (cold) review of the coordinator's finalizing step and of the node's signer key (ffd9157, ce16639):
three attacks that worked, each a test of the defence now (each failed before it).

1. `test_a_revoked_miner_that_stays_live_is_planned_around`: the planner re-planned only when the live
   set changed and knew nothing of revocations, so a hostile assigned miner that revoked its signer and stayed
   live kept every pipeline of the plan, and the batch waited for a pipeline without it until its deadline
   (the owner reading the outputs meanwhile). Now a miner a batch left out is left out of the plan while it
   runs (`lifecycle._plan`), so the task's spare and the other stage form a pipeline and serve its
   lines again.
2. `test_an_owner_and_a_live_miner_that_never_signs_get_no_free_batch`: a live miner that never signed was
   waited for until the deadline, the owner downloaded the outputs while the batch was finalizing, the task
   expired and refunded it in full. Now a batch's results are read only once they are committed
   (`files.RESULTS_READABLE`), and a live miner that has not signed `signature_wait_s` after finalizing began
   is left out like a revoked one.
3. `test_a_running_node_whose_signer_was_moved_declines_and_goes_on`: after `miner signer set`, a running
   node's refused acceptance raised out of every turn of its loop before it delivered results or signed. Now
   the node declines a proposal the coordinator refuses for good, and its consent refuses one once the
   registered signer is not its key.
"""

from __future__ import annotations

import secrets
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from eth_account import Account
from eth_account.signers.local import LocalAccount
from redis import Redis

from client_sdk.chain.anvil import Anvil
from client_sdk.chain.contracts import Market
from coordinator.chain import CoordinatorChain
from coordinator.config import ServedModel, Settings
from coordinator.db.migrate import upgrade
from coordinator.db.models import Batch, File, FileContent, Miner, Result, Signature
from coordinator.db.session import Database
from coordinator.services import files
from coordinator.services.errors import InvalidInput
from coordinator.services.lifecycle import Context, _finalize, advance, made_of
from coordinator.services.live import Heartbeat, LiveMembership
from coordinator.services.planning import _pipelines, active_pipelines, model_spec
from demo.lifecycle import DemoConfig
from miner.node.consent import Consenter
from miner.node.coordinator_client import CoordinatorError
from miner.tiny_checkpoint import build_tiny_model
from tests.helpers import assigned_task, committed_task

MODEL_NAME = "tiny/qwen3"
HALF_THE_MODEL_GB = 0.0012  # as tests/coordinator/test_task_aware_planning.py: two miners make a pipeline
NOW = 1_000
ROOT = "0x" + "cd" * 32


@pytest.fixture(scope="module")
def redis_url() -> Any:
    from demo.services import redis_server

    with redis_server() as url:
        yield url


@pytest.fixture(scope="module")
def served_model(tmp_path_factory: pytest.TempPathFactory) -> ServedModel:
    return ServedModel(MODEL_NAME, build_tiny_model(tmp_path_factory.mktemp("tiny-qwen3")))


@pytest.fixture
def database(tmp_path: Path) -> Any:
    url = f"sqlite:///{tmp_path / 'c.db'}"
    upgrade(url)
    db = Database(url)
    yield db
    db.dispose()


def miner_row(address: str) -> Miner:
    return Miner(
        address=address, model=MODEL_NAME, endpoint="tcp://127.0.0.1:1", region="us-east-1", gpu="RTX4090",
        memory_gb=HALF_THE_MODEL_GB, tflops=82.6, mem_bandwidth_gb_s=1008.0, layer_latency_ms=1.0,
        joined_at=NOW, reachable=True,
    )  # fmt: skip


def finalizing_batch(
    session: Any, owner: str, task_id: int, miners: list[str], signers: list[str], requests: int
) -> Batch:
    """A batch of task `task_id` in finalizing: its commitment pays (and needs the signature of) every miner
    in `signers` for the lines they served together, the others are spares; its output file written."""
    input_file = File(
        id="file-" + secrets.token_hex(4), owner=owner, purpose="batch", filename="in.jsonl", bytes=1,
        created_at=NOW, line_count=requests,
    )  # fmt: skip
    output = File(
        id="file-" + secrets.token_hex(4), owner=owner, purpose="batch_output", filename="out.jsonl",
        bytes=20, created_at=NOW, line_count=requests,
    )  # fmt: skip
    session.add_all([input_file, output])
    session.flush()
    session.add(FileContent(file_id=output.id, data=b'{"answer": "paris"}\n'))
    commitment = {
        "results_root": "0x" + "ab" * 32,
        "input_tokens": 100,
        "output_tokens": 50,
        "payment": 3_000,
        "miner_amounts": [1_000 if m in signers else 0 for m in miners],
        "served_roots": [ROOT if m in signers else "0x" + "00" * 32 for m in miners],
        "miners": miners,
        "request_count": requests,
    }
    batch = Batch(
        id="batch-" + secrets.token_hex(4), owner=owner, input_file_id=input_file.id,
        endpoint="/v1/chat/completions", model=MODEL_NAME, completion_window="24h", task_id=task_id,
        status="finalizing", created_at=NOW, expires_at=NOW + 86_400, in_progress_at=NOW,
        finalizing_at=NOW, request_total=requests, completed_count=requests, miners=miners,
        commitment=commitment, output_file_id=output.id, results_root=commitment["results_root"],
    )  # fmt: skip
    session.add(batch)
    session.flush()
    for index in range(requests):
        session.add(
            Result(
                batch_id=batch.id,
                line_index=index,
                custom_id=f"request-{index}",
                ok=True,
                body='{"answer": "paris"}',
                output_hash="0x" + "ee" * 32,
                input_tokens=50,
                output_tokens=25,
                pipeline=list(signers),
                stage_layers=[1] * len(signers),
                created_at=NOW,
            )
        )
    session.flush()
    return batch


def test_a_revoked_miner_that_stays_live_is_planned_around(
    admin_market: Market,
    accounts: list[LocalAccount],
    database: Database,
    redis_url: str,
    served_model: ServedModel,
) -> None:
    live = LiveMembership(Redis.from_url(redis_url))
    coordinator, user = accounts[1], accounts[2]
    trio = sorted(accounts[3:6], key=lambda a: a.address)
    addresses = [a.address for a in trio]
    task_id = assigned_task(admin_market, coordinator, user, trio)
    miners = admin_market.tasks.miners_of(task_id)
    spec = model_spec(served_model.path, served_model.name)
    # the plan over the task's three live miners: one pipeline of two, the third an idle spare
    plan = [[s.gpu for s in p.stages] for p in _pipelines([miner_row(a) for a in addresses], spec)]
    assert len(plan) == 1 and len(plan[0]) == 2
    hostile, partner = plan[0]
    (spare,) = set(addresses) - set(plan[0])
    with database.session() as session:
        session.add_all([miner_row(a) for a in addresses])
        session.flush()
        for a in addresses:  # every assigned miner stays live: the hostile one too
            live.beat(a, Heartbeat(layer_latency_ms=1.0))
        batch = finalizing_batch(session, user.address, task_id, miners, [hostile, partner], requests=2)
        session.add(Signature(batch_id=batch.id, miner=partner, signature="0x" + "11" * 65, created_at=NOW))
        batch_id, output_id = batch.id, batch.output_file_id
        # the plan as it stood: the hostile miner in its only pipeline
        _pipelines_before = ensure_planned(session, served_model, live)
        assert [p.miners for p in _pipelines_before] == [[hostile, partner]]
    hostile_account = next(a for a in trio if a.address == hostile)
    admin_market.as_account(hostile_account).tasks.revoke_signer(task_id)  # and it stays live
    ctx = worker_context(admin_market, coordinator, redis_url, served_model)
    task = admin_market.tasks.get_task(task_id)

    with database.session() as session:
        batch = session.get(Batch, batch_id)
        assert batch is not None
        _finalize(session, ctx, batch, task, NOW + 60)

    with database.session() as session:
        batch = session.get(Batch, batch_id)
        assert batch is not None
        assert batch.status == "in_progress", batch.status_detail
        assert batch.left_out_miners == [hostile]
        assert batch.status_detail is not None and f"miner(s) {hostile} served them but revoked" in (
            batch.status_detail
        )
        pipelines = active_pipelines(session, MODEL_NAME)
        assert all(hostile not in p.miners for p in pipelines), "planned around the revoked miner"
        assert made_of(pipelines, [partner, spare]) != []
        assert session.get(File, output_id) is None  # the outputs made with it are gone, to be made again


def worker_context(
    market: Market, coordinator: LocalAccount, redis_url: str, served_model: ServedModel
) -> Context:
    """What the coordinator's worker steps a batch with: its settings, its chain connection (as
    `coordinator`), the live set in Redis."""
    settings = Settings(database_url="sqlite://", redis_url=redis_url, models=(served_model,))
    return Context(
        settings, CoordinatorChain(market.as_account(coordinator)), LiveMembership(Redis.from_url(redis_url))
    )


def ensure_planned(session: Any, served: ServedModel, live: LiveMembership) -> list[Any]:
    """The plan the coordinator makes over the live miners of the model (as its worker's steps do)."""
    from coordinator.services.miners import live_miners
    from coordinator.services.planning import ensure_plan

    return ensure_plan(session, served, live_miners(session, live, MODEL_NAME), NOW)


def test_an_owner_and_a_live_miner_that_never_signs_get_no_free_batch(
    admin_market: Market,
    accounts: list[LocalAccount],
    chain: Anvil,
    database: Database,
    redis_url: str,
    served_model: ServedModel,
) -> None:
    coordinator, user, colluder, honest = accounts[1], accounts[2], accounts[3], accounts[4]
    task_id = assigned_task(admin_market, coordinator, user, [colluder, honest])
    config = DemoConfig()
    miners = admin_market.tasks.miners_of(task_id)
    ctx = worker_context(admin_market, coordinator, redis_url, served_model)
    settings, live = ctx.settings, ctx.live
    wall = int(time.time())
    with database.session() as session:
        batch = finalizing_batch(session, user.address, task_id, miners, miners, requests=config.requests)
        batch.finalizing_at = wall - settings.signature_wait_s + 60  # the wait is not over yet
        signed = Signature(batch_id=batch.id, miner=honest.address, signature="0x" + "11" * 65, created_at=0)
        session.add(signed)
        batch_id, output_id = batch.id, batch.output_file_id
    assert output_id is not None

    for m in miners:
        live.beat(m, Heartbeat(layer_latency_ms=1.0))  # the colluder stays live, and never signs
    with database.session() as session:
        assert advance(session, ctx, batch_id) == "finalizing"
        batch = session.get(Batch, batch_id)
        assert batch is not None
        assert batch.status_detail == f"waiting for 1 miner(s) to sign the results: {colluder.address}"
        output = session.get(File, output_id)
        assert output is not None
        with pytest.raises(InvalidInput, match="can be read once the miners' signed commitment is on-chain"):
            files.file_content(session, output)  # the owner cannot read what is not paid for yet
        batch.finalizing_at = wall - settings.signature_wait_s - 1
    with database.session() as session:  # past the wait: the colluder is left out
        assert advance(session, ctx, batch_id) == "finalizing"
        batch = session.get(Batch, batch_id)
        assert batch is not None
        assert batch.left_out_miners == [colluder.address]
        within = f"did not sign the results within {settings.signature_wait_s} s"
        assert batch.status_detail is not None and batch.status_detail.startswith(
            f"waiting: miner(s) {colluder.address} {within}"
        )  # the honest miner alone cannot hold the model: no pipeline serves the lines again

    task = admin_market.tasks.get_task(task_id)
    chain.advance_time(task.deadline - admin_market.chain_time() + 1)
    with database.session() as session:
        assert advance(session, ctx, batch_id) == "expired"
        output = session.get(File, output_id)
        assert output is not None
        with pytest.raises(InvalidInput, match="can be read once"):
            files.file_content(session, output)  # refunded, so never read
    assert admin_market.escrow.balance_of(user.address) == config.max_price, "refunded, and no outputs"
    for m in (colluder, honest):
        stake = admin_market.registry.stake_of(m.address)
        assert stake.locked == 0 and stake.free == config.miner_stake


# ------------------------------------------------------------------------------------------------ change 2


class SignerMovedCoordinator:
    """The coordinator once the miner's account pointed its registered signer at a new key (`miner signer
    set`, the leak response docs/security.md gives) while the node still runs with the old one: it refuses the
    node's acceptances, as `coordinator.services.acceptances.accept` does (InvalidInput, HTTP 400). It holds a
    proposal naming the node (one per batch the node is planned into), a unit's results the node has to
    deliver and a commitment the node has to sign."""

    def __init__(self) -> None:
        self.accepts, self.submitted, self.asked_to_sign = 0, [], 0

    def proposals(self) -> list[dict[str, Any]]:
        return [{"batch_id": "batch_new", "task_id": 5, "stake_lock": 10, "expiry": 2**40}]

    def accept(self, batch_id: str, signature: bytes) -> None:
        self.accepts += 1
        raise CoordinatorError(400, "the signature is not your registered signer's acceptance of this task")

    def submit(self, unit_id: int, results: list[dict[str, Any]]) -> int:
        self.submitted.append(unit_id)
        return len(results)

    def pending_signatures(self) -> list[dict[str, Any]]:
        self.asked_to_sign += 1
        return []

    def claim(self) -> None:
        return None


class OldKeyConsenter:
    """The node's consent, with the key it was started with: its policy accepts the proposal."""

    def refusal(self, proposal: dict[str, Any]) -> None:
        return None

    def lines(self, proposal: dict[str, Any]) -> int:
        return 4

    def sign(self, proposal: dict[str, Any]) -> Any:
        return SimpleNamespace(signature=b"\x01" * 65)


def test_a_running_node_whose_signer_was_moved_declines_and_goes_on(
    served_model: ServedModel, tmp_path: Path
) -> None:
    """The coordinator refuses the node's acceptances once another signer is registered: the node declines
    that proposal after the first refusal, and its turns go on to deliver the results it holds and sign."""
    from client_sdk.device import DeviceProfile
    from miner.node.journal import Journal
    from miner.node.serve import Node, NodeConfig
    from miner.node.stage_host import HostSettings
    from tests.miner.nodes import CACHE

    client = SignerMovedCoordinator()
    config = NodeConfig("tiny", "tcp://127.0.0.1:1", "us-east-1", 31337, "0x" + "11" * 20)
    node = Node(
        config, Account.create(), client, DeviceProfile("cpu", 1.0, 1.0, 1.0, 1.0),  # type: ignore[arg-type]
        HostSettings(served_model.path, "tcp://127.0.0.1:1", CACHE), None,  # type: ignore[arg-type]
        Journal(tmp_path / "served.jsonl"), OldKeyConsenter(),  # type: ignore[arg-type]
    )  # fmt: skip
    try:
        node.serving = {9: [1, 2]}
        node.undelivered.append(({"unit_id": 9, "task_id": 5, "batch_id": "batch_old"}, [{"index": 0}]))
        for _ in range(5):  # five turns of the node's loop
            node._step()
    finally:
        node.host.close()
    assert client.accepts == 1, "refused once, then declined"
    assert client.submitted == [9], "the unit's results are delivered"
    assert client.asked_to_sign >= 1, "and the node goes on to sign"
    assert 9 not in node.serving


def test_a_node_refuses_to_consent_once_its_key_is_not_the_registered_signer(
    admin_market: Market, accounts: list[LocalAccount]
) -> None:
    """A node started with the old key after `miner signer set`: its consent names why it declines."""
    coordinator, user, miner = accounts[1], accounts[2], accounts[3]
    task_id = assigned_task(admin_market, coordinator, user, [miner])
    new_signer = Account.create()
    admin_market.as_account(miner).registry.set_signer(new_signer.address)
    consenter = Consenter(miner, miner.address, admin_market, bytes(32))
    assert consenter.refusal({"task_id": task_id}) == (
        f"the registered signer is now {new_signer.address}, but this node signs with {miner.address}: "
        "restart it with that signer's key (--signer-keystore)"
    )


def test_a_task_its_miners_committed_completes_its_batch_without_serving_anything_again(
    admin_market: Market,
    accounts: list[LocalAccount],
    database: Database,
    redis_url: str,
    served_model: ServedModel,
) -> None:
    """The review's unproven case: the task was committed on-chain (its miners commit what they all vouched
    for when the coordinator does not) while the batch waited for signatures it never stored. The step neither
    waits nor serves lines again (which would discard the trees that answer the owner's challenges): the
    batch completes, and sends no second commit."""
    coordinator, user, miners = accounts[1], accounts[2], accounts[3:5]
    committed = committed_task(admin_market, coordinator, user, list(miners))
    ctx = worker_context(admin_market, coordinator, redis_url, served_model)
    settings = ctx.settings
    addresses = [m.address for m in miners]
    with database.session() as session:
        batch = finalizing_batch(session, user.address, committed.task_id, addresses, addresses, requests=2)
        batch.commitment = committed.commitment.to_json()
        batch.results_root = "0x" + committed.trees.root.hex()
        batch.finalizing_at = int(time.time()) - 10 * settings.signature_wait_s  # long past every wait
        batch_id, output_id = batch.id, batch.output_file_id
    with database.session() as session:
        assert advance(session, ctx, batch_id) == "completed"
        batch = session.get(Batch, batch_id)
        assert batch is not None
        assert batch.commit_tx is None and batch.left_out_miners is None
        assert session.get(File, output_id) is not None  # nothing discarded, nothing served again
