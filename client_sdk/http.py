"""HTTP plumbing for the coordinator client: every write signed by the wallet (see client_sdk.auth), reads on
a session token that one signature buys, every answer parsed with a nesting limit."""

from __future__ import annotations

import threading
import time
from collections.abc import Generator
from typing import Any

import httpx
from eth_account.signers.local import LocalAccount

from client_sdk import bounded_json
from client_sdk.auth import sign_request

SESSION_MARGIN_S = 30  # a token this close to its expiry is renewed rather than used


class WalletSigner(httpx.Auth):
    """Signs each request's method, path, query and body with the account (fresh nonce every time). With a
    `session_url` (the coordinator's /v1/auth/session), a read (GET) carries a session token instead: one
    signed request buys it, it is reused until shortly before it expires, and a read it no longer authorizes
    is sent again signed (and the token dropped)."""

    requires_request_body = True
    requires_response_body = True  # the session answer is read inside the flow

    def __init__(self, account: LocalAccount, session_url: str | None = None) -> None:
        self.account = account
        self.session_url = session_url
        self._session: tuple[str, int] | None = None  # token, expiry (unix seconds)
        self._lock = threading.Lock()  # clients are shared between threads (a miner node's loops)

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        if self.session_url is None or request.method != "GET":
            yield self._signed(request)
            return
        token = self._valid_token()
        if token is None:
            answer = yield self._signed(httpx.Request("POST", self.session_url))
            token = self._keep(answer)
            if token is None:  # a coordinator without sessions, or one that refused: sign this read
                yield self._signed(request)
                return
        request.headers["Authorization"] = f"Bearer {token}"
        response = yield request
        if response.status_code == 401:  # expired early, or the deployment's secret changed
            with self._lock:
                self._session = None
            yield self._signed(request)

    def _signed(self, request: httpx.Request) -> httpx.Request:
        target = request.url.raw_path.decode("latin-1")
        request.headers["Authorization"] = sign_request(self.account, request.method, target, request.content)
        return request

    def _valid_token(self) -> str | None:
        with self._lock:
            if self._session is None or self._session[1] - SESSION_MARGIN_S <= time.time():
                return None
            return self._session[0]

    def _keep(self, answer: httpx.Response) -> str | None:
        """The token of a session answer (kept for the next reads), or None if there is none."""
        if answer.status_code != 200:
            return None
        try:
            body = json_of(answer)
            token, expires_at = str(body["token"]), int(body["expires_at"])
        except (ValueError, KeyError, TypeError):
            return None
        with self._lock:
            self._session = (token, expires_at)
        return token


def coordinator_client(
    url: str, account: LocalAccount, timeout_s: float, transport: httpx.BaseTransport | None = None
) -> httpx.Client:
    """An HTTP client for the coordinator at `url`: writes signed by `account`, reads on a session token."""
    session_url = url.rstrip("/") + "/v1/auth/session"
    return httpx.Client(
        base_url=url, auth=WalletSigner(account, session_url), timeout=timeout_s, transport=transport
    )


def json_of(response: httpx.Response) -> Any:
    """The response's JSON, parsed with a nesting limit (a hostile peer's answer cannot crash us);
    ValueError when it is too deep or malformed."""
    return bounded_json.loads(response.content)
