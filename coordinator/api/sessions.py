"""/v1/auth/session: one wallet signature buys a short-lived bearer token for reads (see
coordinator.api.auth.SessionKeys), so a client polling its batches does not pay a signature recovery and a
nonce write per poll."""

from __future__ import annotations

import time

from fastapi import APIRouter, Request
from pydantic import BaseModel

from coordinator.api.auth import Caller, SessionKeys
from coordinator.api.schemas import ERRORS

router = APIRouter(prefix="/v1/auth", tags=["auth"], responses=ERRORS)


class Session(BaseModel):
    token: str
    expires_at: int


@router.post("/session", summary="A short-lived token for reads (GET), issued for one wallet signature")
async def create_session(request: Request, caller: Caller) -> Session:
    keys: SessionKeys = request.app.state.sessions
    token, expires_at = await keys.issue(caller, int(time.time()))
    return Session(token=token, expires_at=expires_at)
