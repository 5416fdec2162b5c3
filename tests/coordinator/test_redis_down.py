"""With Redis down (crashed, or still loading its append-only file), the API answers every call that needs it
with a 503 in the error envelope naming Redis, never a 500 with a traceback; once Redis is back, calls work
again."""

from __future__ import annotations

import dataclasses

from coordinator.config import Settings
from demo.services import running_redis
from tests.coordinator.conftest import ALICE, ApiServer


def test_calls_while_redis_is_down_get_a_503_naming_it(settings: Settings) -> None:
    with running_redis() as redis_server:
        own = dataclasses.replace(settings, redis_url=redis_server.url)
        with ApiServer(own) as api:
            alice = api.client(ALICE)
            assert alice.get("/v1/batches").status_code == 200
            redis_server.kill()
            for answer in (alice.get("/v1/batches"), alice.post("/v1/auth/session")):
                assert answer.status_code == 503
                assert answer.json()["error"] == {
                    "message": "Redis is unavailable: see /healthz",
                    "type": "server_error",
                    "param": None,
                    "code": "redis_unavailable",
                }
            redis_server.start()
            assert alice.get("/v1/batches").status_code == 200
