"""/v1/relays: what a relay asks the coordinator. Public: it names only public link keys, and a relay has no
wallet, only its link key. Every call waits for a read of the live miners that began after it came, shared
with the calls waiting then (coordinator.api.shared_read), so hammering it costs one read at a time."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, Field

from coordinator.api.schemas import ERRORS
from coordinator.api.shared_read import SharedRead
from coordinator.db.session import Database
from coordinator.services import miners
from coordinator.services.live import LiveMembership

router = APIRouter(prefix="/v1/relays", tags=["miners"], responses=ERRORS)


class RelayMembers(BaseModel):
    relayed: list[str] = Field(
        description="Link keys of the live miners joined through this relay: the relay takes their hellos."
    )
    senders: list[str] = Field(
        description="Link keys of every live miner: the relay forwards their messages to the relayed ones."
    )


RelayKey = Annotated[
    str, Query(min_length=40, max_length=40, description="The relay's public CURVE key (Z85, 40 characters).")
]


@router.get("/members", summary="The link keys a relay serves (stages joined through it, and who may send)")
async def members(key: RelayKey, request: Request) -> RelayMembers:
    miners.require_link_key(key, "key")
    read: SharedRead[list[tuple[str, str | None]]] = request.app.state.live_link_keys
    found = miners.relay_members(await read(), key)
    return RelayMembers(relayed=found.relayed, senders=found.senders)


def live_link_keys_reader(
    database: Database, live: LiveMembership
) -> SharedRead[list[tuple[str, str | None]]]:
    """The read this endpoint shares between its callers: every live miner's link key and relay."""

    def read() -> list[tuple[str, str | None]]:
        with database.session() as session:
            return miners.live_link_keys(session, live)

    return SharedRead(read)
