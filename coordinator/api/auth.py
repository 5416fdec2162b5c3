"""The caller's wallet, from the request's signature (see client_sdk.auth); each nonce is accepted once."""

from __future__ import annotations

import time
from typing import Annotated

import anyio
from fastapi import Depends, Request
from redis.asyncio import Redis

from client_sdk.auth import AuthError, parse_header, verify
from coordinator.api.errors import Unauthenticated


class NonceStore:
    """Nonces seen, in Redis, each kept until its signature would have expired anyway."""

    def __init__(self, redis: Redis) -> None:
        self.redis = redis
        # redis-py's asyncio pool fails a command (MaxConnectionsError) instead of waiting when all its
        # connections are busy, as under more requests in flight than it has connections: claims wait instead
        self._slots = anyio.CapacityLimiter(max(1, redis.connection_pool.max_connections - 4))  # 4: /healthz

    async def claim(self, address: str, nonce: str, expiry: int, now: int) -> bool:
        """True the first time this (address, nonce) is seen."""
        key = f"auth:nonce:{address.lower()}:{nonce}"
        async with self._slots:
            return bool(await self.redis.set(key, b"1", nx=True, ex=max(1, expiry - now + 1)))


async def caller(request: Request) -> str:
    """The checksum address that signed this request; 401 otherwise. Reads (and caches) the body, which the
    signature covers (BodyGuard has bounded its size and depth already)."""
    header = request.headers.get("authorization")
    if header is None:
        raise Unauthenticated(
            "sign the request with your wallet (Authorization: Wallet ...)", "unauthenticated"
        )
    now = int(time.time())
    target = request_target(request)
    try:
        auth = parse_header(header)
        address = verify(auth, request.method, target, await request.body(), now)
    except AuthError as exc:
        raise Unauthenticated(str(exc), "invalid_signature") from exc
    nonces: NonceStore = request.app.state.nonces
    if not await nonces.claim(address, auth.nonce, auth.expiry, now):
        raise Unauthenticated("this request signature was already used (replay)", "replayed_signature")
    return address


def request_target(request: Request) -> str:
    """The path and query exactly as the client sent them (what it signed)."""
    path = (request.scope.get("raw_path") or request.url.path.encode()).decode("latin-1")
    query = request.scope.get("query_string", b"").decode("latin-1")
    return f"{path}?{query}" if query else path


Caller = Annotated[str, Depends(caller)]
