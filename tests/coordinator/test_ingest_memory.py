"""Ingest holds one chunk of a batch file at a time: beyond the file's bytes (read before ingest, and stored
as they are), its peak memory grows with the lines only by what every line must leave behind (its Merkle leaf
and the tree above it, its custom_id for the repeat check), never by the parsed, rendered and tokenized file
(all at once, that cost about 4,300 bytes per line of this file, five times the line itself)."""

from __future__ import annotations

import dataclasses
import gc
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import httpx
import pytest
from starlette.testclient import TestClient

from client_sdk.auth import sign_request
from coordinator.api.app import create_app
from coordinator.config import ServedModel, Settings
from coordinator.db.migrate import upgrade
from coordinator.db.session import Database
from coordinator.services import files
from tests.coordinator.conftest import ALICE
from tests.coordinator.helpers import chat_line, jsonl, padded_batch_file

# what one more line (about 850 bytes in the file) may add to the peak: its 32-byte leaf and the tree's nodes
# above it, its custom_id in the repeat check, with Python's object overheads (measured: about 300 bytes run
# alone, 600 inside the whole suite); holding the file parsed whole cost about 4,300
PER_LINE_BOUND = 1500

T = TypeVar("T")


def ingest_peak(settings: Settings, lines: int) -> int:
    """The peak of Python memory while a file of `lines` long chat lines is ingested (the file's bytes, made
    before, not counted)."""
    data = jsonl([chat_line(f"request-{i}", f"question {i}: " + "many words " * 60) for i in range(lines)])
    database = Database(settings.database_url)

    def ingest() -> None:
        with database.session() as session:
            files.ingest_batch_file(session, settings, ALICE.address, "in.jsonl", data, 0)

    try:
        return peak_of(ingest)[0]
    finally:
        database.dispose()


def peak_of(action: Callable[[], T]) -> tuple[int, T]:
    """The peak of Python memory (bytes traced) while `action` runs, garbage collected before, and its
    result."""
    gc.collect()
    tracemalloc.start()
    try:
        result = action()
        return tracemalloc.get_traced_memory()[1], result
    finally:
        tracemalloc.stop()


@pytest.fixture
def settings(tmp_path: Path, served_model: ServedModel) -> Settings:
    """One SQLite database: the memory measured is this process's, whichever database stores the rows."""
    url = f"sqlite:///{tmp_path / 'coordinator.db'}"
    upgrade(url)
    return Settings(database_url=url, redis_url="redis://127.0.0.1:1", models=(served_model,))


def test_peak_memory_grows_with_the_lines_only_by_what_each_line_leaves_behind(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(files, "INGEST_CHUNK_LINES", 200)
    ingest_peak(settings, 200)  # the tokenizer loaded, the caches warm
    per_line = (ingest_peak(settings, 2000) - ingest_peak(settings, 400)) / 1600
    assert per_line < PER_LINE_BOUND, f"{per_line:.0f} bytes per line"


def upload_peak(client: TestClient, lines: int) -> tuple[int, int]:
    """The peak of Python memory while the API takes a signed upload of `lines` long chat lines (the request,
    made before, not counted), and the file's size."""
    data = padded_batch_file(lines)
    request = httpx.Request(
        "POST", "http://api/v1/files", files={"file": ("in.jsonl", data)}, data={"purpose": "batch"}
    )
    body = request.read()
    headers = {
        "content-type": request.headers["content-type"],
        "authorization": sign_request(ALICE, "POST", "/v1/files", body),
    }
    del request
    peak, response = peak_of(lambda: client.post("/v1/files", content=body, headers=headers))
    assert response.status_code == 200, response.text
    return peak, len(data)


def test_an_upload_through_the_api_is_never_held_whole(
    settings: Settings, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The body is hashed for its signature and spooled to disk as it arrives, the file part is parsed from
    the spool in small pieces and ingested from its mapped file: no step holds the file in Python memory (when
    the body was held for its signature and the file read back whole, each line cost over twice its size)."""
    monkeypatch.setattr(files, "INGEST_CHUNK_LINES", 200)
    with TestClient(create_app(dataclasses.replace(settings, redis_url=redis_url))) as client:
        upload_peak(client, 200)
        small, small_bytes = upload_peak(client, 400)
        large, large_bytes = upload_peak(client, 4000)
    line_bytes = (large_bytes - small_bytes) / 3600
    per_line = (large - small) / 3600
    assert per_line < line_bytes / 2, f"{per_line:.0f} bytes per line of {line_bytes:.0f}"
