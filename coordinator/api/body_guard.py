"""Bounds every request body before any route, dependency or parser sees it: over the size limit it is refused
with 413 (by its Content-Length when declared, else as it streams in), and a body nested deeper than
`client_sdk.bounded_json.MAX_JSON_DEPTH` is refused with 400 without being parsed. So no body, signed or not,
can exhaust memory or recurse the JSON decoder past what the process survives.

Only a file upload (one Content-Type header, `multipart/form-data` in any case) may be as large as an input
file; its lines are parsed one by one, each bounded, by the route. Every other body is checked for depth
whatever its Content-Type says (FastAPI parses a body as JSON with no Content-Type at all, or with any
`application/json` or `application/*+json`, in any case and with any parameters; matching its rules instead
would leave the guard one spelling behind), and is at most `max_json_bytes()` long: what the largest
legitimate message (a unit's results) needs, so that parsing one on the event loop stays short. The depth
is checked piece by piece as the body streams in (a body too deep is refused at the piece that goes too deep,
the rest never read), each piece on a worker thread, except a small one (a heartbeat, a signature), checked
in less time than the hop to a thread takes.

The body is hashed as it arrives (the wallet signature covers its SHA-256, left in the scope under
`BODY_SHA256` for `coordinator.api.auth`) and waits in a spool that moves to disk past 1 MiB; the app reads it
back in 64 KiB pieces. So a 200 MB upload is never held in memory, not even to check its signature."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from tempfile import SpooledTemporaryFile
from typing import IO

import anyio.to_thread
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from client_sdk.bounded_json import DepthScan, TooDeep
from client_sdk.protocol.envelope import error_body

BODYLESS = frozenset({"GET", "HEAD", "OPTIONS", "DELETE"})
BODY_SHA256 = "batchmarket.body_sha256"  # the scope key: the SHA-256 (hex) of the body the app will read
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
SPOOL_IN_MEMORY = 1 << 20
REPLAY_PIECE = 1 << 16
INLINE_DEPTH_CHECK = 1 << 12  # a piece this small takes about 0.1 ms to check on the event loop
UPLOAD = b"multipart/form-data"


def is_upload(headers: list[tuple[bytes, bytes]]) -> bool:
    """A file upload: exactly one Content-Type header, naming a multipart form (media types are
    case-insensitive, RFC 9110). Two headers are never an upload: the guard and the app could each read
    another one."""
    types = [value for name, value in headers if name.lower() == b"content-type"]
    return len(types) == 1 and types[0].split(b";", 1)[0].strip().lower() == UPLOAD


class BodyGuard:
    """`max_bytes()` (an upload) and `max_json_bytes()` (any other body) are read per request, so a settings
    change applies at once."""

    def __init__(self, app: ASGIApp, max_bytes: Callable[[], int], max_json_bytes: Callable[[], int]) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.max_json_bytes = max_json_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope["method"] in BODYLESS:  # never read: a body sent anyway reaches no route and was not signed
            await self.app({**scope, BODY_SHA256: EMPTY_SHA256}, receive, send)
            return
        upload = is_upload(scope["headers"])
        limit = self.max_bytes() if upload else min(self.max_bytes(), self.max_json_bytes())
        headers = dict(scope["headers"])
        declared = headers.get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > limit):
            await self._too_large(send, limit)
            return
        scan = None if upload else DepthScan()
        with SpooledTemporaryFile(max_size=SPOOL_IN_MEMORY) as spool:
            digest, size = hashlib.sha256(), 0
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > limit:
                    await self._too_large(send, limit)
                    return
                if scan is not None:
                    try:
                        await _scanned(scan, chunk)
                    except TooDeep as exc:  # refused at the piece that goes too deep: the rest is never read
                        await self._refuse(send, 400, str(exc), "request_too_deep")
                        return
                digest.update(chunk)
                if size > SPOOL_IN_MEMORY:
                    spool.rollover()  # before the write: a large chunk is never copied into the memory spool
                spool.write(chunk)
                if not message.get("more_body", False):
                    break
            await self.app({**scope, BODY_SHA256: digest.hexdigest()}, _replay(spool, size, receive), send)

    @classmethod
    async def _too_large(cls, send: Send, limit: int) -> None:
        message = f"the request body is over the limit of {limit} bytes"
        await cls._refuse(send, 413, message, "request_too_large")

    @staticmethod
    async def _refuse(send: Send, status: int, message: str, code: str) -> None:
        payload = json.dumps(error_body("invalid_request_error", message, code, None)).encode()
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(payload)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": payload})


async def _scanned(scan: DepthScan, chunk: bytes) -> None:
    """The chunk fed to the body's depth scan: on the event loop when small, else on a worker thread."""
    if len(chunk) <= INLINE_DEPTH_CHECK:
        scan.feed(chunk)
    else:
        await anyio.to_thread.run_sync(scan.feed, chunk)


def _replay(spool: IO[bytes], size: int, receive: Receive) -> Receive:
    """A receive that hands the app the spooled body in pieces, then whatever the client sends next (a
    disconnect)."""
    spool.seek(0)
    done = False

    async def replay() -> Message:
        nonlocal done
        if done:
            return await receive()
        piece = spool.read(REPLAY_PIECE)
        done = spool.tell() >= size
        return {"type": "http.request", "body": piece, "more_body": not done}

    return replay
