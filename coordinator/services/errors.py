"""What can go wrong in a service call, independent of HTTP (the API maps each to a status code)."""

from __future__ import annotations


class ServiceError(Exception):
    def __init__(self, message: str, code: str, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.param = param


class InvalidInput(ServiceError):
    """The caller sent something we cannot accept (400); `param` names the field."""

    def __init__(self, message: str, param: str | None = None, code: str = "invalid_request") -> None:
        super().__init__(message, code, param)


class NotFound(ServiceError):
    """No such object for this caller (404): the same answer whether it is absent or someone else's."""

    def __init__(self, what: str, ident: str) -> None:
        super().__init__(f"no {what} with id {ident!r}", "not_found")


class Conflict(ServiceError):
    """The object exists but is in a state that forbids the request (409)."""


class TooLarge(ServiceError):
    """The upload is over a configured limit (413)."""
