"""The HTTP error envelope, OpenAI's shape: {"error": {"message", "type", "param", "code"}}."""

from __future__ import annotations

from typing import Any


def error_body(error_type: str, message: str, code: str, param: str | None) -> dict[str, Any]:
    return {"error": {"message": message, "type": error_type, "param": param, "code": code}}


def read_error(body: Any) -> tuple[str, str | None] | None:
    """The message and code of an error body, or None if `body` is not one."""
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict) or not isinstance(error.get("message"), str):
        return None
    code = error.get("code")
    return error["message"], code if isinstance(code, str) else None
