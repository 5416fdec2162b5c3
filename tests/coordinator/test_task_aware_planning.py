"""Only a pipeline made of a task's own assigned miners can serve it. The planner keeps the miners of batches
in progress together, so a newcomer joining (or a miner rejoining after a restart) cannot pull one of them
into a pipeline the task cannot use while its own miners sit idle, the wedge a restarted stage once caused."""

from __future__ import annotations

from coordinator.config import ServedModel
from coordinator.db.models import Miner
from coordinator.db.session import Database
from coordinator.scheduling.strategies import make_plan
from coordinator.services.lifecycle import active_assignments, made_of
from coordinator.services.planning import STRATEGY, cluster_of, ensure_plan, model_spec, rtts_for
from tests.coordinator.conftest import MODEL_NAME
from tests.coordinator.helpers import running_batch

NOW = 1_000
HALF_THE_MODEL_GB = 0.0012  # each miner holds half of the tiny model's layers: two make a pipeline
# a plan over all three pairs the first two by address: the task's head with the newcomer
HEAD, NEWCOMER, TAIL = "0x" + "a" * 40, "0x" + "b" * 40, "0x" + "c" * 40


def miner(address: str, region: str = "us-east-1") -> Miner:
    return Miner(
        address=address, model=MODEL_NAME, endpoint="tcp://127.0.0.1:1", region=region, gpu="RTX4090",
        memory_gb=HALF_THE_MODEL_GB, tflops=82.6, mem_bandwidth_gb_s=1008.0, layer_latency_ms=1.0,
        joined_at=NOW, reachable=True,
    )  # fmt: skip


def test_the_miners_of_a_batch_in_progress_are_planned_together(
    db: Database, served_model: ServedModel
) -> None:
    live = [miner(a) for a in (HEAD, NEWCOMER, TAIL)]
    mixed = make_plan(STRATEGY, cluster_of(live), model_spec(served_model.path, served_model.name))
    assert [[s.gpu for s in p.stages] for p in mixed.pipelines] == [
        [HEAD, NEWCOMER]
    ]  # what planning all wedged

    with db.session() as session:
        session.add_all(live)
        batch = running_batch(session, "0x" + "1" * 40, 4, NOW)
        batch.miners = [HEAD, TAIL]
        session.flush()
        assert active_assignments(session).committed == {HEAD, TAIL}
        pipelines = ensure_plan(session, served_model, live, NOW, active_assignments(session).committed)
        assert [p.miners for p in pipelines] == [[HEAD, TAIL]]
        assert made_of(pipelines, batch.miners) == pipelines


def test_a_finished_batch_frees_its_miners_for_any_pipeline(db: Database, served_model: ServedModel) -> None:
    with db.session() as session:
        batch = running_batch(session, "0x" + "1" * 40, 4, NOW)
        batch.miners = [HEAD, TAIL]
        batch.status = "completed"
        session.flush()
        assert active_assignments(session).committed == frozenset()


def test_a_task_whose_live_miners_cannot_hold_the_model_alone_is_planned_with_everyone(
    db: Database, served_model: ServedModel
) -> None:
    live = [
        miner(a) for a in (HEAD, NEWCOMER)
    ]  # the task's tail is down: its head alone holds half the model
    with db.session() as session:
        session.add_all(live)
        pipelines = ensure_plan(session, served_model, live, NOW, frozenset({HEAD, TAIL}))
        assert [p.miners for p in pipelines] == [[HEAD, NEWCOMER]]


def test_a_miner_in_a_region_the_table_does_not_know_is_planned(
    db: Database, served_model: ServedModel
) -> None:
    """A miner names its region freely ("local", "home-berlin"): it is planned, priced as far from every
    other region as the table's farthest pair, instead of failing every plan (which left batches waiting with
    "cannot hold a replica")."""
    far = [miner(a, region="home-berlin") for a in (HEAD, TAIL)]
    with db.session() as session:
        session.add_all(far)
        pipelines = ensure_plan(session, served_model, far, NOW)
        assert [p.miners for p in pipelines] == [[HEAD, TAIL]]
    table = rtts_for({"home-berlin"})
    assert (
        table["home-berlin"]["us-east-1"]
        == table["us-east-1"]["home-berlin"]
        == max(ms for region, row in table.items() if region != "home-berlin" for ms in row.values())
    )
