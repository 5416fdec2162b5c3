"""Bodies built to crash or exhaust the API are refused before anything parses them, signed or not, and the
service keeps answering: a JSON body or an upload line nested 80,000 levels deep (which once overflowed the C
stack, because eth-account's py_ecc raises Python's recursion limit) under every Content-Type spelling, and
bodies over the size limit, declared or streamed, with a far lower limit for anything but a file upload. A
body too deep is refused as it streams in, not after its end."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from urllib.parse import urlsplit

import httpx

from tests.coordinator.conftest import ALICE, ApiServer
from tests.coordinator.helpers import chat_line, jsonl

DEEP = b'{"a":' * 80_000 + b"1" + b"}" * 80_000


def _healthy(api: ApiServer) -> bool:
    return bool(api.client(ALICE).get("/healthz", auth=None).json()["status"] == "ok")


def test_a_deeply_nested_body_is_refused_unparsed_and_the_api_stays_up(api: ApiServer) -> None:
    alice = api.client(ALICE)
    headers = {"content-type": "application/json"}
    for auth in (None, alice.auth):
        response = alice.post("/v1/batches", content=DEEP, headers=headers, auth=auth)  # type: ignore[arg-type]
        assert response.status_code == 400
        assert response.json()["error"] == {
            "message": "the JSON nests more than 64 levels deep",
            "type": "invalid_request_error",
            "param": None,
            "code": "request_too_deep",
        }
    assert _healthy(api)


# FastAPI parses a body as JSON with no Content-Type, or with application/json or application/*+json in any
# case and with any parameters; the last pair: two headers, the app reads the first, a naive guard the last
SPELLINGS: list[list[tuple[str, str]]] = [
    [],
    [("content-type", "application/JSON")],
    [("content-type", "Application/Json; charset=utf-8")],
    [("content-type", "application/json;charset=UTF-8")],
    [("content-type", "application/merge-patch+JSON")],
    [("content-type", "application/vnd.batchmarket+json; v=1")],
    [("content-type", "text/plain")],
    [("content-type", "application/json"), ("content-type", "multipart/form-data; boundary=x")],
]


def test_a_deep_body_is_refused_under_every_content_type(api: ApiServer) -> None:
    for path in ("/v1/batches", "/v1/miners/join", "/v1/miners/work/1/results"):
        for headers in SPELLINGS:
            response = httpx.post(f"{api.url}{path}", content=DEEP, headers=headers, timeout=30)
            assert response.status_code == 400, (path, headers)
            assert response.json()["error"]["code"] == "request_too_deep"
    assert _healthy(api)


def test_a_huge_shallow_body_is_refused_before_it_is_read(api: ApiServer) -> None:
    """100 MB of flat JSON, unsigned: refused by its declared length alone (it would have held the worker's
    event loop past its health check while being parsed)."""
    where = urlsplit(api.url)
    with socket.create_connection((where.hostname, where.port), timeout=10) as raw:
        raw.sendall(
            b"POST /v1/batches HTTP/1.1\r\nHost: api\r\nContent-Type: application/json\r\n"
            b"Content-Length: 100000000\r\n\r\n[" + b"0," * 1000
        )
        answer = raw.recv(65_536)
    assert answer.startswith(b"HTTP/1.1 413 ")
    assert b'"request_too_large"' in answer
    assert _healthy(api)


def test_a_deep_body_is_refused_as_it_streams_in_before_its_end(api: ApiServer) -> None:
    """A body declared at 10 MB whose first 160 KB nest 80,000 levels deep: refused as soon as that part
    arrives, while the client has not sent the rest (the guard never waits for a body it already refuses)."""
    where = urlsplit(api.url)
    with socket.create_connection((where.hostname, where.port), timeout=20) as raw:
        raw.sendall(
            b"POST /v1/batches HTTP/1.1\r\nHost: api\r\nContent-Type: application/json\r\n"
            b"Content-Length: 10000000\r\n\r\n" + b'{"a":' * 80_000
        )
        answer = raw.recv(65_536)
    assert answer.startswith(b"HTTP/1.1 400 ")
    assert b'"request_too_deep"' in answer
    assert _healthy(api)


def test_only_an_upload_may_be_larger_than_the_json_limit(api: ApiServer) -> None:
    api.reconfigure(max_json_bytes=10_000)
    alice = api.client(ALICE)
    padded = json.dumps({"input_file_id": "file-x", "padding": "x" * 20_000}).encode()

    def chunks() -> Iterator[bytes]:  # no Content-Length: the limit applies as the body streams in
        for start in range(0, len(padded), 4_096):
            yield padded[start : start + 4_096]

    streamed = httpx.post(f"{api.url}/v1/batches", content=chunks(), headers={"content-type": "text/plain"})
    assert streamed.status_code == 413 and streamed.json()["error"]["code"] == "request_too_large"
    upload = jsonl([chat_line(f"a{i}") for i in range(200)])  # about 30 KB, over the JSON limit
    assert len(upload) > 10_000
    stored = alice.post("/v1/files", files={"file": ("in.jsonl", upload)}, data={"purpose": "batch"})
    assert stored.status_code == 200, stored.text


def test_a_deeply_nested_upload_line_is_refused_naming_the_line(api: ApiServer) -> None:
    data = jsonl([chat_line("a")]) + DEEP + b"\n"
    response = api.client(ALICE).post(
        "/v1/files", files={"file": ("in.jsonl", data)}, data={"purpose": "batch"}
    )
    assert response.status_code == 400
    assert response.json()["error"]["message"].startswith("line 2: the JSON nests more than 64 levels deep")
    assert _healthy(api)


def test_bodies_over_the_limit_are_refused_declared_or_streamed(api: ApiServer) -> None:
    api.reconfigure(max_file_bytes=1_000)
    body = json.dumps({"input_file_id": "file-x", "padding": "x" * 70_000}).encode()
    alice = api.client(ALICE)
    declared = alice.post("/v1/batches", content=body, headers={"content-type": "application/json"})
    assert declared.status_code == 413 and declared.json()["error"]["code"] == "request_too_large"

    def chunks() -> Iterator[bytes]:  # no Content-Length: the limit applies as the body streams in
        for start in range(0, len(body), 4_096):
            yield body[start : start + 4_096]

    streamed = httpx.post(
        f"{api.url}/v1/batches", content=chunks(), headers={"content-type": "application/json"}, timeout=30
    )
    assert streamed.status_code == 413 and streamed.json()["error"]["code"] == "request_too_large"
    assert _healthy(api)


def test_errors_starlette_raises_itself_come_in_the_error_envelope(api: ApiServer) -> None:
    """A multipart form with too many fields (Starlette's own limit), an unknown route, a wrong method: each
    answers in the same envelope as every other error, not as {"detail": ...}."""
    alice = api.client(ALICE)
    fields = {f"extra{i}": "x" for i in range(5)} | {"purpose": "batch"}
    crowded = alice.post("/v1/files", files={"file": ("in.jsonl", b"{}\n")}, data=fields)
    assert crowded.status_code == 400
    assert crowded.json() == {
        "error": {
            "message": "Too many fields. Maximum number of fields is 4.",
            "type": "invalid_request_error",
            "param": None,
            "code": "invalid_request",
        }
    }
    missing = alice.get("/v1/nothing-here", auth=None)
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
    wrong = alice.put("/v1/batches", auth=None)
    assert wrong.status_code == 405 and "POST" in wrong.headers["allow"] and wrong.json()["error"]["message"]
