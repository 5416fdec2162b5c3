"""Errors in OpenAI's shape: {"error": {"message", "type", "param", "code"}}, with the right status code."""

from __future__ import annotations

import logging

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DataError
from starlette.exceptions import HTTPException as StarletteHTTPException

from client_sdk.protocol.envelope import error_body
from coordinator.services.errors import Conflict, InvalidInput, NotFound, ServiceError, TooLarge

log = logging.getLogger(__name__)

STATUS = {InvalidInput: 400, NotFound: 404, Conflict: 409, TooLarge: 413}


class Unauthenticated(ServiceError):
    """No valid wallet signature (401)."""


async def service_error_handler(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ServiceError)
    if isinstance(exc, Unauthenticated):
        return JSONResponse(error_body("authentication_error", exc.message, exc.code, None), status_code=401)
    status = next(code for kind, code in STATUS.items() if isinstance(exc, kind))
    return JSONResponse(error_body("invalid_request_error", exc.message, exc.code, exc.param), status)


async def unstorable_value_handler(_request: Request, exc: Exception) -> JSONResponse:
    """A value the database refuses (a NUL character in text, for PostgreSQL) is the caller's error, not
    ours."""
    assert isinstance(exc, DataError)
    message = "a value in the request cannot be stored (text must not contain NUL characters)"
    return JSONResponse(error_body("invalid_request_error", message, "invalid_value", None), 400)


async def database_down_handler(_request: Request, exc: Exception) -> JSONResponse:
    """The database is unreachable or not migrated to this code's schema: a 503 that says so (and a log line
    for the operator), never a traceback."""
    log.error("database error: %s", exc)
    message = "the database is unavailable or not migrated: see /healthz"
    return JSONResponse(error_body("server_error", message, "database_unavailable", None), 503)


async def redis_down_handler(_request: Request, exc: Exception) -> JSONResponse:
    """Redis (nonces, sessions, live miners, the workers' queue) is unreachable or still loading: a 503 that
    says so (and a log line for the operator), never a traceback."""
    log.error("redis error: %s", exc)
    message = "Redis is unavailable: see /healthz"
    return JSONResponse(error_body("server_error", message, "redis_unavailable", None), 503)


async def http_error_handler(_request: Request, exc: Exception) -> JSONResponse:
    """Errors Starlette raises itself (a multipart form with too many fields, an unknown route, a wrong
    method) in the same envelope as ours, with their status code."""
    assert isinstance(exc, StarletteHTTPException)
    kind = "invalid_request_error" if exc.status_code < 500 else "server_error"
    code = "not_found" if exc.status_code == 404 else "invalid_request"
    response = JSONResponse(error_body(kind, str(exc.detail), code, None), exc.status_code)
    for name, value in (exc.headers or {}).items():  # e.g. Allow on a 405
        response.headers[name] = value
    return response


async def validation_error_handler(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    first = exc.errors()[0]
    param = ".".join(str(part) for part in first["loc"][1:]) or None
    message = f"{param}: {first['msg']}" if param else str(first["msg"])
    return JSONResponse(error_body("invalid_request_error", message, "invalid_request", param), 400)
