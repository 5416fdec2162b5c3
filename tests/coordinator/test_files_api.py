"""POST /v1/files and friends: every line validated, the input root computed, only the owner reads."""

from __future__ import annotations

import json

import httpx
import pytest

from client_sdk.inputs import input_tree
from client_sdk.openai_batch import DEFAULT_MAX_TOKENS
from coordinator.api.files import content_disposition
from tests.coordinator.conftest import ALICE, BOB, MODEL_NAME, ApiServer
from tests.coordinator.helpers import batch_file, chat_line, jsonl, padded_batch_file


def upload(client: httpx.Client, data: bytes, purpose: str = "batch") -> tuple[int, dict[str, object]]:
    response = client.post("/v1/files", files={"file": ("in.jsonl", data)}, data={"purpose": purpose})
    return response.status_code, response.json()


def test_upload_returns_the_file_with_its_input_root(api: ApiServer) -> None:
    alice = api.client(ALICE)
    data = batch_file(5)
    status, file = upload(alice, data)
    assert status == 200, file
    lines = [json.loads(row) for row in data.decode().splitlines()]
    assert file["object"] == "file" and file["purpose"] == "batch" and file["filename"] == "in.jsonl"
    assert (file["bytes"], file["request_count"]) == (len(data), 5)
    assert (file["endpoint"], file["model"]) == ("/v1/chat/completions", "tiny/qwen3")
    assert file["input_root"] == "0x" + input_tree(lines).root.hex()
    assert alice.get(f"/v1/files/{file['id']}").json() == file
    assert alice.get(f"/v1/files/{file['id']}/content").content == data


def test_a_large_upload_streams_through_the_spool_and_comes_back_exact(api: ApiServer) -> None:
    """3 MB: the body is spooled to disk past 1 MiB, read back in pieces for the multipart parser and ingested
    from its mapped file; the signature still covers every byte."""
    alice = api.client(ALICE)
    data = padded_batch_file(2000)
    status, file = upload(alice, data)
    assert status == 200, file
    assert (file["bytes"], file["request_count"]) == (len(data), 2000)
    lines = [json.loads(row) for row in data.decode().splitlines()]
    assert file["input_root"] == "0x" + input_tree(lines).root.hex()
    assert alice.get(f"/v1/files/{file['id']}/content").content == data


BAD_FILES = [
    (
        jsonl([chat_line("a"), chat_line("b")]) + b'{"custom_id": "c",\n',
        "line 3: malformed JSON",
        "invalid_file",
    ),
    (jsonl([chat_line("a"), chat_line("a")]), "line 2: custom_id 'a' repeats line 1", "invalid_file"),
    (
        jsonl([{**chat_line("a"), "url": "/v1/embeddings"}]),
        "line 1: unsupported url '/v1/embeddings'",
        "invalid_file",
    ),
    (
        jsonl([chat_line("a"), chat_line("b", model="gpt-4o")]),
        "line 2: every request in a batch must use one model",
        "invalid_file",
    ),
    (
        jsonl([chat_line("a", model="gpt-4o")]),
        "line 1: model 'gpt-4o' is not served here (served: tiny/qwen3)",
        "model_not_found",
    ),
    (
        jsonl([chat_line("a"), chat_line("b", max_tokens=600)]),
        "line 2: the prompt has",
        "context_length_exceeded",
    ),
    (b"", "the file is empty", "invalid_file"),
    (b"\xff\xfe", "line 1: the file is not UTF-8 text", "invalid_file"),
    (
        jsonl([chat_line("a", temperature=3)]),
        "line 1: body.temperature must be from 0.0 to 2.0",
        "invalid_file",
    ),
    # three that once answered 500 or failed minutes later: an integer past Python's 4,300-digit limit, a lone
    # surrogate (a JSON escape UTF-8 cannot encode), token ids the model has no embedding for
    (
        jsonl([chat_line("a")]).replace(b'"max_tokens": 8', b'"max_tokens": ' + b"9" * 5_000),
        "line 1: the JSON holds an integer of 5000 digits (at most 80)",
        "invalid_file",
    ),
    (
        jsonl([chat_line("a", "fine"), chat_line("b", "\ud800 alone")]),
        "line 2: body.messages[0].content holds a lone UTF-16 surrogate",
        "invalid_file",
    ),
    (
        jsonl(
            [
                {
                    "custom_id": "ids",
                    "method": "POST",
                    "url": "/v1/completions",
                    "body": {"model": MODEL_NAME, "prompt": [1, 2, 1_000_000], "max_tokens": 8},
                }
            ]
        ),
        "line 1: body.prompt holds token id 1000000, outside the model's vocabulary of",
        "invalid_file",
    ),
]


@pytest.mark.parametrize(("data", "message", "code"), BAD_FILES)
def test_bad_files_are_rejected_naming_the_line(api: ApiServer, data: bytes, message: str, code: str) -> None:
    status, body = upload(api.client(ALICE), data)
    assert status == 400
    error = body["error"]
    assert isinstance(error, dict)
    assert error["message"].startswith(message), error
    assert (error["code"], error["param"], error["type"]) == (code, "file", "invalid_request_error")


def test_a_file_over_the_line_limit_is_rejected(api: ApiServer) -> None:
    client = api.client(ALICE)
    api.reconfigure(max_file_lines=3)
    status, body = upload(client, batch_file(4))
    assert status == 400 and body["error"]["message"] == "the file has 4 lines; the limit is 3"  # type: ignore[index]


def test_a_file_over_the_size_limit_is_refused_before_parsing(api: ApiServer) -> None:
    client = api.client(ALICE)
    api.reconfigure(max_file_bytes=1000)
    status, body = upload(client, batch_file(200))
    assert status == 413 and body["error"]["code"] == "file_too_large"  # type: ignore[index]


def test_purpose_must_be_batch(api: ApiServer) -> None:
    status, body = upload(api.client(ALICE), batch_file(1), purpose="fine-tune")
    assert status == 400 and body["error"]["message"] == "purpose must be 'batch'"  # type: ignore[index]


def test_default_max_tokens_counts_against_the_context(api: ApiServer) -> None:
    line = chat_line("a")
    del line["body"]["max_tokens"]
    status, body = upload(api.client(ALICE), jsonl([line]))  # the tiny model's context is 512 tokens
    assert status == 400
    assert f"max_tokens is {DEFAULT_MAX_TOKENS}, over the model's context of 512" in body["error"]["message"]


def test_another_wallet_cannot_read_the_file(api: ApiServer) -> None:
    _, file = upload(api.client(ALICE), batch_file(1))
    bob = api.client(BOB)
    for path in (f"/v1/files/{file['id']}", f"/v1/files/{file['id']}/content"):
        response = bob.get(path)
        assert response.status_code == 404
        assert response.json()["error"]["message"] == f"no file with id {file['id']!r}"


def test_any_file_name_downloads_under_its_own_name(api: ApiServer) -> None:
    """RFC 6266: a name outside ASCII comes back exactly (filename*) beside an ASCII fallback."""
    alice = api.client(ALICE)
    name = "données été 😀.jsonl"
    response = alice.post("/v1/files", files={"file": (name, batch_file(2))}, data={"purpose": "batch"})
    assert response.status_code == 200, response.text
    assert response.json()["filename"] == name
    download = alice.get(f"/v1/files/{response.json()['id']}/content")
    assert download.status_code == 200
    assert download.headers["content-disposition"] == (
        'attachment; filename="donn_es _t_ _.jsonl"; '
        "filename*=UTF-8''donn%C3%A9es%20%C3%A9t%C3%A9%20%F0%9F%98%80.jsonl"
    )


def test_quotes_and_control_characters_never_reach_the_header() -> None:
    assert content_disposition('a"b\\c\r\n.jsonl') == (
        "attachment; filename=\"a_b_c__.jsonl\"; filename*=UTF-8''a%22b%5Cc%0D%0A.jsonl"
    )


def test_files_are_listed_a_page_at_a_time_and_only_the_owners(api: ApiServer) -> None:
    """Newest first (by second, then by id): the pages cover the list once, with no file twice."""
    alice, bob = api.client(ALICE), api.client(BOB)
    ids = {upload(alice, batch_file(1 + i))[1]["id"] for i in range(3)}
    _, bobs = upload(bob, batch_file(1))
    listed = [f["id"] for f in alice.get("/v1/files").json()["data"]]
    assert ids <= set(listed) and bobs["id"] not in listed
    first = alice.get("/v1/files", params={"limit": 2}).json()
    assert (len(first["data"]), first["has_more"]) == (2, len(listed) > 2)
    rest = alice.get("/v1/files", params={"limit": 100, "after": first["last_id"]}).json()
    assert [f["id"] for f in first["data"] + rest["data"]] == listed
    assert alice.get("/v1/files", params={"purpose": "batch_output"}).json()["data"] == []
    refused = alice.get("/v1/files", params={"limit": 101})
    assert refused.status_code == 400 and refused.json()["error"]["message"] == "limit must be from 1 to 100"


def test_a_file_is_deleted_by_its_owner_only(api: ApiServer) -> None:
    alice, bob = api.client(ALICE), api.client(BOB)
    _, file = upload(alice, batch_file(2))
    assert bob.delete(f"/v1/files/{file['id']}").status_code == 404
    deleted = alice.delete(f"/v1/files/{file['id']}")
    assert deleted.status_code == 200
    assert deleted.json() == {"id": file["id"], "object": "file", "deleted": True}
    assert alice.get(f"/v1/files/{file['id']}").status_code == 404
    assert alice.get(f"/v1/files/{file['id']}/content").status_code == 404
    assert alice.delete(f"/v1/files/{file['id']}").status_code == 404
