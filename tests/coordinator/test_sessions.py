"""Session tokens: one wallet signature buys a 15-minute bearer token that authorizes reads only, as that
wallet. A forged, altered, expired or write-carrying token is refused; the SDK's signer buys one token for
many reads and signs a read again when its token stops working."""

from __future__ import annotations

import asyncio
import time

import httpx
from eth_account.signers.local import LocalAccount
from redis.asyncio import Redis

from client_sdk.http import WalletSigner
from coordinator.api.auth import SESSION_TTL_S, SessionKeys
from tests.coordinator.conftest import ALICE, BOB, ApiServer
from tests.coordinator.helpers import batch_file


def session(api: ApiServer, account: LocalAccount = ALICE) -> dict[str, object]:
    response = api.client(account).post("/v1/auth/session")
    assert response.status_code == 200
    return dict(response.json())


def bearer(api: ApiServer, token: str, method: str = "GET", path: str = "/v1/batches") -> httpx.Response:
    return httpx.request(method, api.url + path, headers={"Authorization": f"Bearer {token}"}, timeout=30)


def test_a_signed_session_reads_as_its_wallet_until_it_expires(api: ApiServer) -> None:
    before = int(time.time())
    issued = session(api)
    assert before + SESSION_TTL_S <= int(str(issued["expires_at"])) <= int(time.time()) + SESSION_TTL_S
    uploaded = api.client(ALICE).post(
        "/v1/files", files={"file": ("in.jsonl", batch_file(1))}, data={"purpose": "batch"}
    )
    file_id = uploaded.json()["id"]
    token = str(issued["token"])
    assert bearer(api, token, path=f"/v1/files/{file_id}").json()["id"] == file_id
    assert bearer(api, token).status_code == 200
    # the same token is good for many reads: no nonce is spent
    assert [bearer(api, token).status_code for _ in range(3)] == [200, 200, 200]
    # another wallet's token reads as that wallet
    other = str(session(api, BOB)["token"])
    assert bearer(api, other, path=f"/v1/files/{file_id}").status_code == 404


def test_a_session_token_cannot_write(api: ApiServer) -> None:
    token = str(session(api)["token"])
    for method, path in (("POST", "/v1/auth/session"), ("POST", "/v1/batches/batch_x/cancel")):
        response = bearer(api, token, method, path)
        assert response.status_code == 401
        assert response.json()["error"]["code"] == "session_read_only"


def test_forged_altered_and_expired_tokens_are_refused(api: ApiServer) -> None:
    token = str(session(api)["token"])
    address, expiry, mac = token.split(".")
    keys = SessionKeys(Redis.from_url(api.app.state.settings.redis_url))
    expired, _ = asyncio.run(keys.issue(address, int(time.time()) - SESSION_TTL_S - 1))
    cases = {
        f"{BOB.address}.{expiry}.{mac}": "invalid_session",  # another wallet's address under Alice's mac
        f"{address}.{int(expiry) + 3600}.{mac}": "invalid_session",  # a later expiry
        f"{address}.{expiry}.{'0' * 64}": "invalid_session",
        f"{address.lower()}.{expiry}.{mac}": "invalid_session",  # not the checksum form it was issued in
        "not a token": "invalid_session",
        token + "." + "x" * 300: "invalid_session",
        expired: "session_expired",
    }
    for forged, code in cases.items():
        response = bearer(api, forged)
        assert response.status_code == 401, forged
        assert response.json()["error"]["code"] == code, forged


def test_the_sdk_buys_one_session_for_many_reads_and_signs_when_it_fails(api: ApiServer) -> None:
    signer = WalletSigner(ALICE, api.url + "/v1/auth/session")
    sessions_bought = []

    def count(request: httpx.Request) -> None:
        if request.url.path == "/v1/auth/session":
            sessions_bought.append(request)

    with httpx.Client(base_url=api.url, auth=signer, event_hooks={"request": [count]}, timeout=30) as client:
        assert [client.get("/v1/batches").status_code for _ in range(5)] == [200] * 5
        assert len(sessions_bought) == 1
        token, expires_at = signer._session or ("", 0)
        signer._session = (token[:-1] + ("0" if token[-1] != "0" else "1"), expires_at)  # stops working
        assert client.get("/v1/batches").status_code == 200  # sent again, signed
        assert signer._session is None
        assert client.get("/v1/batches").status_code == 200
        assert len(sessions_bought) == 2
        assert client.post("/v1/auth/session").status_code == 200  # writes are always signed
