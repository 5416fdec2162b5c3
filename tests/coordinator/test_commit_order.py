"""A write is committed before its answer leaves the API: a client told that its batch is cancelling finds it
so on any API worker at once, and a commit that fails answers as an error instead of after a 200."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from sqlalchemy import event
from starlette.types import Receive, Scope, Send

from client_sdk.http import WalletSigner
from coordinator.api.app import create_app
from coordinator.config import Settings
from coordinator.db.session import Database
from tests.coordinator.conftest import ALICE
from tests.coordinator.helpers import running_batch


def test_a_cancel_is_committed_before_its_answer_is_sent(settings: Settings) -> None:
    database = Database(settings.database_url)
    with database.session() as session:
        batch_id = running_batch(session, ALICE.address, 2, 1_000).id
    database.dispose()
    app = create_app(settings)
    order: list[str] = []
    event.listen(app.state.database.sessions, "after_commit", lambda _session: order.append("commit"))

    async def recorded(scope: Scope, receive: Receive, send: Send) -> None:
        async def send_recorded(message: Any) -> None:
            if message["type"] == "http.response.start":
                order.append(f"answer {message['status']}")
            await send(message)

        await app(scope, receive, send_recorded)

    async def cancel() -> None:
        transport = httpx.ASGITransport(app=recorded)
        auth = WalletSigner(ALICE)
        async with httpx.AsyncClient(transport=transport, base_url="http://api", auth=auth) as client:
            answer = await client.post(f"/v1/batches/{batch_id}/cancel")
            assert answer.status_code == 200, answer.text
            assert answer.json()["status"] == "cancelling"

    asyncio.run(cancel())
    assert order == ["commit", "answer 200"]
