"""The caller's wallet: from the request's signature (see client_sdk.auth), each nonce accepted once; or, for
a read, from a session token.

A session token is `address.expiry.mac`, the mac an HMAC-SHA256 of `address.expiry` under a secret every API
worker of the deployment shares (created once in Redis). Checking one costs a hash: no signature recovery and
no Redis write. It authorizes GET requests only, as the wallet that signed for it, until it expires (15
minutes): a leaked token can read that wallet's files and batches for that long, never create, cancel or sign
anything. Writes stay wallet-signed with a single-use nonce.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from typing import Annotated

import anyio
from eth_utils.address import is_checksum_address
from fastapi import Depends, Request, Security
from fastapi.security import APIKeyHeader
from redis.asyncio import Redis

from client_sdk.auth import AuthError, parse_header, verify
from coordinator.api.body_guard import BODY_SHA256
from coordinator.api.errors import Unauthenticated


def command_slots(redis: Redis) -> anyio.CapacityLimiter:
    """How many of the API's Redis commands may be in flight at once. redis-py's asyncio pool fails a command
    (MaxConnectionsError) instead of waiting when all its connections are busy, as under more requests in
    flight than it has connections (or a herd of waits woken at once): commands wait for a slot instead. Four
    connections stay for /healthz, one for the wake channel's subscription."""
    return anyio.CapacityLimiter(max(1, redis.connection_pool.max_connections - 5))


class NonceStore:
    """Nonces seen, in Redis, each kept until its signature would have expired anyway."""

    def __init__(self, redis: Redis, slots: anyio.CapacityLimiter) -> None:
        self.redis = redis
        self._slots = slots

    async def claim(self, address: str, nonce: str, expiry: int, now: int) -> bool:
        """True the first time this (address, nonce) is seen."""
        key = f"auth:nonce:{address.lower()}:{nonce}"
        async with self._slots:
            return bool(await self.redis.set(key, b"1", nx=True, ex=max(1, expiry - now + 1)))


SESSION_TTL_S = 900
SECRET_KEY = "auth:session-secret"
MAX_TOKEN_CHARS = 200  # an address, a timestamp and a 64-digit mac, with room to spare


class SessionKeys:
    """Issues and checks session tokens under the deployment's shared secret (fetched from Redis once per
    process; the first worker to ask creates it)."""

    def __init__(self, redis: Redis) -> None:
        self.redis = redis
        self._secret: bytes | None = None

    async def _key(self) -> bytes:
        if self._secret is None:
            await self.redis.set(SECRET_KEY, secrets.token_bytes(32), nx=True)
            secret = await self.redis.get(SECRET_KEY)
            if not isinstance(secret, bytes) or len(secret) != 32:
                raise RuntimeError("the session secret in Redis is malformed")
            self._secret = secret
        return self._secret

    async def issue(self, address: str, now: int) -> tuple[str, int]:
        """A token for `address` and the time it expires."""
        expiry = now + SESSION_TTL_S
        claim = f"{address}.{expiry}"
        return f"{claim}.{_mac(await self._key(), claim)}", expiry

    async def address_of(self, token: str, now: int) -> str:
        """The wallet a valid, unexpired token was issued to; Unauthenticated otherwise."""
        parts = token.split(".") if len(token) <= MAX_TOKEN_CHARS else []
        if len(parts) != 3 or not is_checksum_address(parts[0]) or not parts[1].isdigit():
            raise Unauthenticated(
                "not a session token of this coordinator (it takes no API keys): sign requests with your "
                "wallet (Authorization: Wallet ...; from openai-python: http_client=httpx.Client("
                "auth=client_sdk.http.WalletSigner(account)), see docs/api.md), or read with a token from "
                "POST /v1/auth/session",
                "invalid_session",
            )
        address, expiry, mac = parts
        if not hmac.compare_digest(mac, _mac(await self._key(), f"{address}.{expiry}")):
            raise Unauthenticated("invalid session token", "invalid_session")
        if int(expiry) < now:
            raise Unauthenticated("the session token expired: sign a new session", "session_expired")
        return address


def _mac(key: bytes, claim: str) -> str:
    return hmac.new(key, claim.encode(), hashlib.sha256).hexdigest()


WALLET = APIKeyHeader(
    name="Authorization",
    scheme_name="Wallet",
    auto_error=False,
    description="`Wallet address=..., nonce=..., expiry=..., signature=...`: the caller's wallet signs the "
    "method, path, query and body (client_sdk.auth.sign_request); or, for reads (GET), `Bearer <token>` "
    "from POST /v1/auth/session.",
)


async def caller(request: Request, _header: Annotated[str | None, Security(WALLET)] = None) -> str:
    """The checksum address that signed this request, or that a read's session token was issued to; 401
    otherwise. The signature covers the body's SHA-256, which BodyGuard computed as the body arrived: the body
    itself is not read here."""
    header = request.headers.get("authorization")
    if header is None:
        raise Unauthenticated(
            "sign the request with your wallet (Authorization: Wallet ...)", "unauthenticated"
        )
    now = int(time.time())
    if header.startswith("Bearer "):
        keys: SessionKeys = request.app.state.sessions
        address = await keys.address_of(header.removeprefix("Bearer "), now)
        if request.method != "GET":
            raise Unauthenticated(
                "a session token authorizes reads (GET) only: sign this request with your wallet",
                "session_read_only",
            )
        return address
    target = request_target(request)
    try:
        auth = parse_header(header)
        address = verify(auth, request.method, target, request.scope[BODY_SHA256], now)
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
