"""The explorer's routes: GET only. Each page is a template drawn from its view model, and has a JSON twin
under /explorer/api that its script polls (the same figures by key). An id that is not one, or one that names
nothing, is a 404 page; a chain that cannot be read, a 503 page; never a stack trace. Every explorer response
carries a strict Content-Security-Policy (scripts, styles and fetches from the coordinator only, no inline
script or style) and is not to be framed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from jinja2 import Environment, FileSystemLoader, StrictUndefined
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from client_sdk.protocol.envelope import error_body
from coordinator.explorer.reads import BATCH_ID, Explorer, Unavailable
from coordinator.services.errors import NotFound

HERE = Path(__file__).parent
PREFIX = "/explorer"
REFRESH_MS = 3000  # how often a page's script reads its JSON twin
HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
        "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
TEMPLATES = {
    "market": "market.html",
    "batch": "batch.html",
    "task": "task.html",
    "dispute": "dispute.html",
    "disputes": "disputes.html",
}

# autoescape on for every template: miners name their own region and endpoint, and tokens their own symbol
templates = Environment(
    loader=FileSystemLoader(HERE / "templates"), autoescape=True, undefined=StrictUndefined
)
router = APIRouter(prefix=PREFIX, include_in_schema=False)


class Protected:
    """Adds HEADERS to every response under /explorer (pages, JSON twins, static files, errors). A plain ASGI
    middleware, as coordinator.api.metrics.Measured is."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if path != PREFIX and not path.startswith(PREFIX + "/"):
            await self.app(scope, receive, send)
            return

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [
                    *message.get("headers", []),
                    *((k.lower().encode(), v.encode()) for k, v in HEADERS.items()),
                ]
            await send(message)

        await self.app(scope, receive, sending)


class Static(StaticFiles):
    """The explorer's script and style sheet; any other path under /explorer/static is the explorer's 404 page
    (as every unknown explorer path is), not the API's JSON error."""

    async def get_response(self, path: str, scope: Scope) -> Response:
        try:
            return await super().get_response(path, scope)
        except HTTPException as exc:
            if exc.status_code != 404:
                raise
            return _error_page(404, "no such explorer file")


def install(app: FastAPI, explorer: Explorer) -> None:
    """Serves the explorer from `app`: its pages, JSON twins and static files."""
    app.state.explorer = explorer
    app.mount(f"{PREFIX}/static", Static(directory=HERE / "static"), name="explorer-static")
    app.include_router(router)
    app.add_middleware(Protected)


def _explorer(request: Request) -> Explorer:
    value: Explorer = request.app.state.explorer
    return value


def _html(template: str, code: int = 200, **context: Any) -> HTMLResponse:
    body = templates.get_template(template).render(refresh_ms=REFRESH_MS, **context)
    return HTMLResponse(body, status_code=code)


def _error_page(code: int, message: str) -> HTMLResponse:
    return _html("error.html", code, status=code, message=message)


async def _page(request: Request, kind: str, key: str = "") -> Response:
    try:
        page = await _explorer(request).page(kind, key)
    except NotFound as exc:
        return _error_page(404, exc.message)
    except Unavailable as exc:
        return _error_page(503, exc.message)
    return _html(TEMPLATES[kind], page=page)


async def _data(request: Request, kind: str, key: str = "") -> Response:
    try:
        page = await _explorer(request).page(kind, key)
    except NotFound as exc:
        return JSONResponse(error_body("invalid_request_error", exc.message, exc.code, None), 404)
    except Unavailable as exc:
        return JSONResponse(error_body("server_error", exc.message, exc.code, None), 503)
    return JSONResponse(page.live())


@router.get("")
async def market(request: Request) -> Response:
    return await _page(request, "market")


@router.get("/batches/{batch_id}")
async def batch(request: Request, batch_id: str) -> Response:
    return await _page(request, "batch", batch_id)


@router.get("/tasks/{task_id}")
async def task(request: Request, task_id: str) -> Response:
    return await _page(request, "task", task_id)


@router.get("/disputes")
async def disputes(request: Request) -> Response:
    return await _page(request, "disputes")


@router.get("/disputes/{dispute_id}")
async def dispute(request: Request, dispute_id: str) -> Response:
    return await _page(request, "dispute", dispute_id)


@router.get("/find")
async def find(q: str = "") -> Response:
    """The search box: a batch id leads to its page, a number to that task's."""
    q = q.strip()[:64]
    if BATCH_ID.fullmatch(q):
        return RedirectResponse(f"{PREFIX}/batches/{q}", status_code=303)
    if q.isascii() and q.isdecimal():
        return RedirectResponse(f"{PREFIX}/tasks/{int(q)}", status_code=303)
    return _error_page(404, "search for a batch id (batch_ and 24 hex digits) or a task number")


@router.get("/api/market")
async def market_data(request: Request) -> Response:
    return await _data(request, "market")


@router.get("/api/batches/{batch_id}")
async def batch_data(request: Request, batch_id: str) -> Response:
    return await _data(request, "batch", batch_id)


@router.get("/api/tasks/{task_id}")
async def task_data(request: Request, task_id: str) -> Response:
    return await _data(request, "task", task_id)


@router.get("/api/disputes")
async def disputes_data(request: Request) -> Response:
    return await _data(request, "disputes")


@router.get("/api/disputes/{dispute_id}")
async def dispute_data(request: Request, dispute_id: str) -> Response:
    return await _data(request, "dispute", dispute_id)


@router.get("/{rest:path}")
async def unknown(rest: str) -> Response:
    """Any other path under /explorer (static files are mounted before this router)."""
    return _error_page(404, "no such explorer page")
