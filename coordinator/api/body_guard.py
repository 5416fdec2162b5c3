"""Bounds every request body before any route, dependency or parser sees it: over the size limit it is refused
with 413 (by its Content-Length when declared, else as it streams in), and a JSON body nested deeper than
`client_sdk.bounded_json.MAX_JSON_DEPTH` is refused with 400 without being parsed. So no body, signed or not,
can exhaust memory or recurse the JSON decoder past what the process survives."""

from __future__ import annotations

import json
from collections.abc import Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from client_sdk.bounded_json import TooDeep, check_depth
from client_sdk.protocol.envelope import error_body

BODYLESS = frozenset({"GET", "HEAD", "OPTIONS", "DELETE"})


class BodyGuard:
    """`max_bytes()` is read per request, so a settings change applies at once."""

    def __init__(self, app: ASGIApp, max_bytes: Callable[[], int]) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in BODYLESS:
            await self.app(scope, receive, send)
            return
        limit = self.max_bytes()
        headers = dict(scope["headers"])
        declared = headers.get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > limit):
            await self._too_large(send, limit)
            return
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                await self._too_large(send, limit)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        chunks.clear()  # the parts would live as long as the request: a large upload held twice
        if b"json" in headers.get(b"content-type", b""):
            try:
                check_depth(body)
            except TooDeep as exc:
                await self._refuse(send, 400, str(exc), "request_too_deep")
                return
        await self.app(scope, _replay(body, receive), send)

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


def _replay(body: bytes, receive: Receive) -> Receive:
    """A receive that hands the app the whole body once, then whatever the client sends next (a
    disconnect)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay
