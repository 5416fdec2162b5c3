"""HTTP plumbing for the coordinator client: every request signed by the wallet (see client_sdk.auth), every
answer parsed with a nesting limit."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import httpx
from eth_account.signers.local import LocalAccount

from client_sdk import bounded_json
from client_sdk.auth import sign_request


class WalletSigner(httpx.Auth):
    """Signs each request's method, path, query and body with the account (fresh nonce every time)."""

    requires_request_body = True

    def __init__(self, account: LocalAccount) -> None:
        self.account = account

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        target = request.url.raw_path.decode("latin-1")
        request.headers["Authorization"] = sign_request(self.account, request.method, target, request.content)
        yield request


def json_of(response: httpx.Response) -> Any:
    """The response's JSON, parsed with a nesting limit (a hostile peer's answer cannot crash us);
    ValueError when it is too deep or malformed."""
    return bounded_json.loads(response.content)
