"""/v1/relays: what a relay asks the coordinator. Public: it names only public link keys, and a relay has no
wallet, only its link key."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from coordinator.api.deps import DbSession
from coordinator.api.miners import Live
from coordinator.api.schemas import ERRORS
from coordinator.services import miners

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
def members(key: RelayKey, db: DbSession, live: Live) -> RelayMembers:
    found = miners.relay_members(db, live, key)
    return RelayMembers(relayed=found.relayed, senders=found.senders)
