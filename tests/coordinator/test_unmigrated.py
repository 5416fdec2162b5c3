"""An API started over a database that was never migrated says so: /healthz answers 503 naming the fix, and
every other call a 503 with one line, never a 500 with a traceback."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from coordinator.config import Settings
from coordinator.db.migrate import head_revision
from tests.coordinator.conftest import ALICE, ApiServer


def test_an_unmigrated_database_is_reported_not_crashed_on(settings: Settings, tmp_path: Path) -> None:
    fresh = dataclasses.replace(settings, database_url=f"sqlite:///{tmp_path / 'never-migrated.db'}")
    with ApiServer(fresh) as api:
        alice = api.client(ALICE)
        health = alice.get("/healthz", auth=None)
        assert health.status_code == 503
        assert health.json()["database"] == (
            f"not migrated (at nothing, needs {head_revision()}): run `coordinator db upgrade`"
        )
        assert health.json()["redis"] == "ok"
        assert health.json()["chain"].startswith("not configured")  # no chain here: reported, not failing
        assert alice.get("/readyz", auth=None).json() == health.json()
        assert alice.get("/livez", auth=None).json() == {"status": "ok"}  # the process itself is up
        listing = alice.get("/v1/batches")
        assert listing.status_code == 503
        assert listing.json()["error"] == {
            "message": "the database is unavailable or not migrated: see /healthz",
            "type": "server_error",
            "param": None,
            "code": "database_unavailable",
        }
