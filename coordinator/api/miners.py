"""/v1/miners: the miner side. Every call is signed by the miner's registered wallet."""

from __future__ import annotations

import time
from typing import Annotated, Any

import anyio.to_thread
from fastapi import APIRouter, Depends, Request, Response
from fastapi import Path as FastPath
from pydantic import BaseModel, Field
from redis.asyncio import Redis as AsyncRedis
from sqlalchemy.orm import Session

from client_sdk.device import DeviceProfile
from client_sdk.protocol.endpoint import tcp_connect_ms
from coordinator.api.auth import Caller
from coordinator.api.deps import AppSettings, DbSession
from coordinator.api.schemas import CONFLICT, ERRORS
from coordinator.chain import CoordinatorChain
from coordinator.db.session import Database
from coordinator.nudge import Nudger
from coordinator.services import acceptances, dispatch, lifecycle, miners, signing
from coordinator.services.errors import Conflict, InvalidInput
from coordinator.services.live import Heartbeat, LiveMembership
from coordinator.services.miners import Joining, StageRelay

router = APIRouter(prefix="/v1/miners", tags=["miners"], responses=ERRORS | CONFLICT)
MAX_UNIT_RESULTS = 4096
MAX_OUTPUT_TOKENS = 1 << 20


def chain(request: Request) -> CoordinatorChain:
    value: CoordinatorChain | None = request.app.state.chain
    if value is None:
        raise Conflict("this coordinator is not connected to a chain", "no_chain")
    return value


def live(request: Request) -> LiveMembership:
    value: LiveMembership = request.app.state.live
    return value


Chain = Annotated[CoordinatorChain, Depends(chain)]
Live = Annotated[LiveMembership, Depends(live)]


# A measured time a planner can use: finite (Python's JSON reads NaN and Infinity), at most a minute.
Millis = Annotated[float, Field(ge=0, le=60_000, allow_inf_nan=False)]
Capacity = Annotated[float, Field(gt=0, allow_inf_nan=False)]


class Device(BaseModel):
    gpu: str = Field(max_length=64)
    memory_gb: Capacity
    tflops: Capacity
    mem_bandwidth_gb_s: Capacity
    layer_latency_ms: Millis = Field(gt=0)


class RelayBody(BaseModel):
    endpoint: str = Field(max_length=255, description="Where the relay listens: tcp://HOST:PORT.")
    key: str = Field(min_length=40, max_length=40, description="The relay's public CURVE key (Z85).")
    region: str = Field(min_length=1, max_length=64, description="The relay's region.")


class Join(BaseModel):
    model: str = Field(max_length=255)
    endpoint: str = Field(max_length=255)
    link_key: str = Field(
        min_length=40, max_length=40, description="The public CURVE key (Z85) of the node's stage links."
    )
    region: str = Field(max_length=64)
    device: Device
    relay: RelayBody | None = Field(
        default=None, description="Behind NAT: the relay its peers send through (null: they dial it)."
    )


# Bounded as the database stores them: a value past these is refused (400), never a server error.
UnitNumber = Annotated[int, Field(ge=1, lt=2**63)]
UnitId = Annotated[int, FastPath(ge=1, lt=2**63, description="Work unit id.")]
TokenId = Annotated[int, Field(ge=0, lt=2**31)]


class Beat(BaseModel):
    layer_latency_ms: Millis = Field(gt=0, description="One layer's step time, in ms.")
    queue_depth: int = Field(default=0, ge=0, lt=2**31)
    rtt_ms: dict[Annotated[str, Field(max_length=64)], Millis] = Field(
        default_factory=dict, max_length=1024, description="Round trips to other regions, in ms."
    )
    relay_rtt_ms: Millis | None = Field(
        default=None, description="Behind a relay: the round trip to it, in ms."
    )
    units: list[UnitNumber] = Field(
        default_factory=list, max_length=64, description="Work units being served."
    )


class GivenBack(BaseModel):
    units: list[UnitNumber] = Field(min_length=1, max_length=64, description="Work units given up.")


class LineResultBody(BaseModel):
    index: int = Field(ge=0, lt=2**31)
    text: str = Field(max_length=4 * MAX_OUTPUT_TOKENS)
    output_token_ids: list[TokenId] = Field(max_length=MAX_OUTPUT_TOKENS)
    prompt_tokens: int = Field(ge=0, lt=2**31)
    finish_reason: str = Field(max_length=16)


class UnitResults(BaseModel):
    results: list[LineResultBody] = Field(max_length=MAX_UNIT_RESULTS)


class LineProgressBody(BaseModel):
    index: int = Field(ge=0, lt=2**31)
    output_token_ids: list[TokenId] = Field(min_length=1, max_length=MAX_OUTPUT_TOKENS)


class UnitProgress(BaseModel):
    lines: list[LineProgressBody] = Field(max_length=MAX_UNIT_RESULTS)


class SignatureBody(BaseModel):
    signature: str = Field(max_length=140)


@router.post("/join", summary="Join with a profiled device (checked against the on-chain registration)")
def join(
    body: Join, miner: Caller, db: DbSession, chain: Chain, live: Live, settings: AppSettings
) -> dict[str, Any]:
    served = settings.model(body.model)
    if served is None:
        raise Conflict(
            f"model {body.model!r} is not served here (served: {settings.offered})", "model_not_found"
        )
    device = DeviceProfile(**body.device.model_dump())
    relay = StageRelay(**body.relay.model_dump()) if body.relay is not None else None
    record = miners.join(
        db,
        chain.registry,
        live,
        miner,
        Joining(body.model, body.endpoint, body.link_key, body.region, device, relay),
        served.model_hash,
        int(time.time()),
        probe=lambda endpoint: tcp_connect_ms(endpoint) is not None,
    )
    db.commit()
    live.mark_joined(miner)  # its beats take the fast path from now on
    return {
        "miner": record.address,
        "model": record.model,
        "joined_at": record.joined_at,
        "reachable": record.reachable,
        "relayed": record.relay_endpoint is not None,
    }


@router.post("/heartbeat", summary="Report per-layer latency, RTTs and queue depth; keeps the miner live")
async def heartbeat(
    body: Beat, request: Request, miner: Caller, live: Live, settings: AppSettings
) -> dict[str, Any]:
    """Keeps the miner live and the leases of the units it serves; `lost`: the units it named that are no
    longer its to serve (it should drop them).

    The beat of a live miner serving no unit (every idle miner, every few seconds) is two Redis commands on
    the event loop, while the mark of its row read in the last JOINED_MARK_S stands. Any other beat reads
    the database, on a worker thread, and marks the row read."""
    beat = Heartbeat(body.layer_latency_ms, body.queue_depth, body.rtt_ms, body.relay_rtt_ms)
    if not body.units:
        redis: AsyncRedis = request.app.state.redis
        async with request.app.state.redis_slots:
            if await redis.exists(live.joined_key(miner)) and await redis.set(
                live.key(miner), live.encode(beat), xx=True, ex=live.ttl_s
            ):
                return {"status": "ok", "lost": []}
    database: Database = request.app.state.database
    now, lease_s = int(time.time()), settings.work_lease_s

    def beat_and_renew() -> list[int]:
        with database.session() as db:
            miners.heartbeat(db, live, miner, beat)
            lost = dispatch.renew_leases(db, miner, body.units, now, lease_s)
        live.mark_joined(miner)  # committed: the row stands
        return lost

    async with database.request_slots:  # as every request's session waits (coordinator.api.deps)
        lost = await anyio.to_thread.run_sync(beat_and_renew)
    return {"status": "ok", "lost": lost}


@router.get("/assignment", summary="This miner's stage in the active plan (null while it has none)")
def assignment(miner: Caller, db: DbSession) -> dict[str, Any] | None:
    return miners.assignment(db, miner)


@router.post("/work/claim", summary="Lease the next work unit of a pipeline this miner heads")
def claim(request: Request, miner: Caller, db: DbSession, settings: AppSettings) -> Any:
    unit = dispatch.claim(db, miner, int(time.time()), settings.work_lease_s)
    if unit is None:
        return Response(status_code=204)
    request.app.state.metrics.resumed_lines.inc(sum(1 for line in unit["lines"] if line["resume"]))
    return unit


# Progress has its own endpoint rather than riding on the heartbeat: a heartbeat is the liveness signal and
# stays small and cheap (a slow one gets a live miner dropped), while a report can carry a unit's worth of
# tokens; and a report is about one unit, checked like its results (only the head of the pipeline the unit
# is leased to), so a stale or foreign one is refused on its own without touching the heartbeat.
@router.post("/work/{unit_id}/progress", summary="Report the output tokens so far of a leased unit's lines")
def progress(unit_id: UnitId, body: UnitProgress, miner: Caller, db: DbSession) -> dict[str, int]:
    partials = {line.index: tuple(line.output_token_ids) for line in body.lines}
    if len(partials) != len(body.lines):
        raise InvalidInput("a line is reported twice", "lines")
    return {"stored": dispatch.record_progress(db, miner, unit_id, partials)}


@router.post("/work/{unit_id}/results", summary="Return the results of a leased work unit")
def results(
    unit_id: UnitId, body: UnitResults, request: Request, miner: Caller, db: DbSession
) -> dict[str, int]:
    lines = [
        dispatch.LineResult(r.index, r.text, tuple(r.output_token_ids), r.prompt_tokens, r.finish_reason)
        for r in body.results
    ]
    submitted = dispatch.submit(db, miner, unit_id, lines, int(time.time()))
    _nudge(request, db, submitted.batch_id)
    return {"stored": submitted.stored}


@router.post(
    "/work/give-back",
    summary="Give up leased units at once (a new plan, a stage gone): the next sweep hands them on",
)
def give_back(body: GivenBack, request: Request, miner: Caller, db: DbSession) -> dict[str, int]:
    batches = dispatch.give_back(db, miner, list(body.units), int(time.time()))
    for batch_id in batches:
        _nudge(request, db, batch_id)
    return {"batches": len(batches)}


@router.get("/acceptances", summary="Assignments proposed to this miner, waiting for its consent")
def proposals(miner: Caller, db: DbSession) -> list[dict[str, Any]]:
    return acceptances.pending(db, miner)


@router.post(
    "/acceptances/{batch_id}", summary="Accept a proposed assignment's stake lock (EIP-712 AcceptTask)"
)
def accept(
    batch_id: str, body: SignatureBody, request: Request, miner: Caller, db: DbSession, chain: Chain
) -> dict[str, str]:
    acceptances.accept(db, chain, miner, batch_id, body.signature, int(time.time()))
    _nudge(request, db, batch_id)
    return {"status": "ok"}


@router.get("/signing", summary="Result commitments waiting for this miner's signature")
def pending(miner: Caller, db: DbSession) -> list[dict[str, Any]]:
    return signing.pending(db, miner)


@router.post("/signing/{batch_id}", summary="Sign a batch's result commitment (EIP-712)")
def sign(
    batch_id: str, body: SignatureBody, request: Request, miner: Caller, db: DbSession, chain: Chain
) -> dict[str, str]:
    signing.accept(db, chain, miner, batch_id, body.signature, int(time.time()))
    _nudge(request, db, batch_id)
    return {"status": "ok"}


class Unrecorded(BaseModel):
    lines: list[Annotated[int, Field(ge=0, lt=2**31)]] = Field(min_length=1, max_length=MAX_UNIT_RESULTS * 16)


@router.post(
    "/signing/{batch_id}/unrecorded",
    summary="Name the lines credited to this miner that it has no record of serving: they are served again",
)
def unrecorded(
    batch_id: str,
    body: Unrecorded,
    request: Request,
    miner: Caller,
    db: DbSession,
    chain: Chain,
    live: Live,
    settings: AppSettings,
) -> dict[str, int]:
    ctx = lifecycle.Context(settings, chain, live)
    again = signing.disown(db, ctx, miner, batch_id, body.lines, int(time.time()))
    _nudge(request, db, batch_id)
    return {"served_again": again}


def _nudge(request: Request, db: Session, batch_id: str) -> None:
    """Commits first, so that the worker the nudge wakes sees what this request stored."""
    db.commit()
    nudge: Nudger = request.app.state.nudge
    nudge(batch_id)
