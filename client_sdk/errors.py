"""Errors meant for people: each carries a one-line message that a CLI prints instead of a stack trace."""

from __future__ import annotations


class UserError(Exception):
    """Something the user can fix; `str(error)` is a complete one-line explanation."""


class ChainError(UserError):
    """The chain or its RPC endpoint is not what we need (unreachable, wrong chain, missing deployment)."""


class ContractRevert(UserError):
    """A contract call reverted with a known custom error."""

    def __init__(self, error_name: str, args: dict[str, object], message: str) -> None:
        super().__init__(message)
        self.error_name = error_name
        self.error_args = args
