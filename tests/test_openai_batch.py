"""OpenAI Batch files: valid lines parse to exactly what they say, every kind of bad line is reported with its
line number and reason, prompts render with a real tokenizer, and output lines have OpenAI's shape."""

from __future__ import annotations

import json
import mmap
import tempfile
from typing import Any
from unittest.mock import patch

import pytest
from hypothesis import given
from hypothesis import strategies as st
from transformers import AutoTokenizer

from client_sdk import openai_batch
from client_sdk.openai_batch import (
    CHAT,
    COMPLETIONS,
    DEFAULT_MAX_TOKENS,
    BatchFormatError,
    error_line,
    iter_rows,
    output_line,
    parse_batch,
    prompt_token_ids,
    response_body,
)
from miner.tiny_checkpoint import build_tokenizer

TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=20)
# custom_id and model: any text but NUL, which no database column can hold
NAME = TEXT.filter(lambda text: "\x00" not in text)
OPTIONAL = {
    "max_tokens": st.integers(1, 1 << 31),
    "temperature": st.floats(0, 2) | st.integers(0, 2),
    "top_p": st.floats(0, 1, exclude_min=True),
    "seed": st.integers(0, 2**63 - 1),
}


@st.composite
def request_line(draw: st.DrawFn, custom_id: str) -> dict[str, Any]:
    url = draw(st.sampled_from([CHAT, COMPLETIONS]))
    body: dict[str, Any] = {"model": draw(NAME.filter(str.strip))}
    if url == CHAT:
        roles = st.sampled_from(["system", "user", "assistant"])
        body["messages"] = draw(st.lists(st.fixed_dictionaries({"role": roles, "content": TEXT}), min_size=1))
    else:
        body["prompt"] = draw(TEXT | st.lists(st.integers(0, 2**31), min_size=1, max_size=8))
    for key, values in OPTIONAL.items():
        if draw(st.booleans()):
            body[key] = draw(values)
    return {"custom_id": custom_id, "method": "POST", "url": url, "body": body}


@st.composite
def batch(draw: st.DrawFn) -> list[dict[str, Any]]:
    ids = draw(st.lists(NAME, min_size=1, max_size=6, unique=True))
    return [draw(request_line(custom_id)) for custom_id in ids]


def jsonl(lines: list[Any]) -> bytes:
    return "".join(json.dumps(line) + "\n" for line in lines).encode()


@given(batch())
def test_valid_lines_parse_to_what_they_say(lines: list[dict[str, Any]]) -> None:
    parsed = parse_batch(jsonl(lines), max_lines=10)
    assert [p.line_number for p in parsed] == list(range(1, len(lines) + 1))
    for line, got in zip(lines, parsed, strict=True):
        body = line["body"]
        assert (got.custom_id, got.url, got.model, got.raw) == (
            line["custom_id"],
            line["url"],
            body["model"],
            line,
        )
        assert got.max_tokens == body.get("max_tokens", DEFAULT_MAX_TOKENS)
        assert got.temperature == body.get("temperature", 1.0)
        assert got.top_p == body.get("top_p", 1.0)
        assert got.seed == body.get("seed")
        if line["url"] == CHAT:
            assert got.messages == tuple((m["role"], m["content"]) for m in body["messages"])
        else:
            prompt = body["prompt"]
            assert got.prompt == (prompt if isinstance(prompt, str) else tuple(prompt))


MUTATIONS: list[tuple[str, Any, str]] = [
    ("method", "GET", "method must be 'POST'"),
    ("url", "/v1/embeddings", "unsupported url '/v1/embeddings'"),
    ("custom_id", None, "custom_id must be a string"),
    ("custom_id", "", "custom_id must be a string"),
    ("custom_id", "a\x00b", "custom_id must be a string of 1 to 512 characters, none of them NUL"),
    ("body", [], "body must be a JSON object"),
    ("body.model", None, "body.model must name a model"),
    ("body.max_tokens", 0, "body.max_tokens must be an integer from 1"),
    ("body.max_tokens", 2.5, "body.max_tokens must be an integer from 1"),
    ("body.temperature", 2.5, "body.temperature must be from 0.0 to 2.0"),
    ("body.temperature", "hot", "body.temperature must be a number"),
    ("body.top_p", 0, "body.top_p must be above 0.0 to 1.0"),
    ("body.top_p", 1.5, "body.top_p must be above 0.0 to 1.0"),
    ("body.seed", -1, "body.seed must be an integer from 0"),
    ("body.seed", 2**63, "body.seed must be an integer from 0"),
    ("body.n", 2, "body.n must be 1"),
    ("body.stream", True, "body.stream is not supported"),
]


@given(lines=batch(), where=st.integers(0, 5), mutation=st.sampled_from(MUTATIONS))
def test_a_bad_field_is_reported_with_its_line(
    lines: list[dict[str, Any]], where: int, mutation: tuple[str, Any, str]
) -> None:
    where %= len(lines)
    field, value, reason = mutation
    target = lines[where]
    if field.startswith("body."):
        target["body"][field.removeprefix("body.")] = value
    else:
        target[field] = value
    with pytest.raises(BatchFormatError) as error:
        parse_batch(jsonl(lines), max_lines=10)
    assert str(error.value).startswith(f"line {where + 1}: {reason}")


@given(lines=batch(), where=st.integers(0, 5))
def test_malformed_json_names_its_line(lines: list[dict[str, Any]], where: int) -> None:
    where %= len(lines)
    rows = jsonl(lines).decode().splitlines()
    rows[where] = rows[where][:-1]  # drop the closing brace
    with pytest.raises(BatchFormatError, match=rf"^line {where + 1}: malformed JSON"):
        parse_batch(("\n".join(rows) + "\n").encode(), max_lines=10)


def chat(custom_id: str) -> dict[str, Any]:
    return {
        "custom_id": custom_id,
        "method": "POST",
        "url": CHAT,
        "body": {"model": "m", "messages": [{"role": "user", "content": "hi"}]},
    }


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"", "the file is empty"),
        (jsonl([chat("a"), chat("b"), chat("a")]), "line 3: custom_id 'a' repeats line 1"),
        (jsonl([chat(str(i)) for i in range(4)]), "the file has 4 lines; the limit is 3"),
        (jsonl([chat("a")]) + b"\n" + jsonl([chat("b")]), "line 2: the line is empty"),
        (jsonl([chat("a")]) + b"\xff\n", "line 2: the file is not UTF-8 text"),
        (jsonl([[1, 2]]), "line 1: a request line must be a JSON object"),
        (jsonl([{**chat("a"), "extra": 1}]), "line 1: unknown field 'extra'"),
        (jsonl([{**chat("a"), "body": {"model": "m", "messages": []}}]), "body.messages must be a non-empty"),
        (
            jsonl([{**chat("a"), "url": COMPLETIONS, "body": {"model": "m", "prompt": [1, -2]}}]),
            "line 1: body.prompt must be a non-empty string or a non-empty list of token ids",
        ),
    ],
)
def test_bad_files(data: bytes, reason: str) -> None:
    with pytest.raises(BatchFormatError) as error:
        parse_batch(data, max_lines=3)
    assert reason in str(error.value)
    assert "\n" not in str(error.value)


def rows_or_error(data: openai_batch.FileBytes) -> list[tuple[int, str]] | str:
    try:
        return list(iter_rows(data, max_lines=40))
    except BatchFormatError as exc:
        return str(exc)


@given(
    st.lists(st.sampled_from([b"\n", b"{}", b"ab", b"\xff", "\u00e9".encode()]), min_size=1, max_size=60),
    st.integers(1, 8),
)
def test_a_mapped_file_reads_as_its_bytes_do(pieces: list[bytes], piece_size: int) -> None:
    """An upload is read mapped from its spool file: the same lines, numbers and errors as its bytes give,
    whatever the size of the pieces its newlines are counted in."""
    data = b"".join(pieces)
    rows = data.removesuffix(b"\n").split(b"\n")
    with tempfile.TemporaryFile() as spool, patch.object(openai_batch, "COUNT_PIECE", piece_size):
        spool.write(data)
        spool.flush()
        with mmap.mmap(spool.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            assert rows_or_error(mapped) == rows_or_error(data)
        if len(rows) <= 40 and b"\xff" not in data:
            assert rows_or_error(data) == [(number, row.decode()) for number, row in enumerate(rows, 1)]


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Any:
    directory = tmp_path_factory.mktemp("tokenizer")
    build_tokenizer(directory)
    return AutoTokenizer.from_pretrained(directory)


def test_prompts_render_with_a_real_tokenizer(tokenizer: Any) -> None:
    line = {**chat("a"), "body": {"model": "m", "messages": [{"role": "user", "content": "What is Paris?"}]}}
    chat_line, text_line, ids_line = parse_batch(
        jsonl(
            [
                line,
                {
                    "custom_id": "b",
                    "method": "POST",
                    "url": COMPLETIONS,
                    "body": {"model": "m", "prompt": "Hi"},
                },
                {
                    "custom_id": "c",
                    "method": "POST",
                    "url": COMPLETIONS,
                    "body": {"model": "m", "prompt": [7, 9]},
                },
            ]
        ),
        max_lines=3,
    )
    rendered = prompt_token_ids(tokenizer, chat_line)
    assert tokenizer.decode(rendered) == "<|im_start|>user\nWhat is Paris?<|im_end|>\n<|im_start|>assistant\n"
    assert tokenizer.decode(prompt_token_ids(tokenizer, text_line)) == "Hi"
    assert prompt_token_ids(tokenizer, ids_line) == [7, 9]


def test_output_and_error_lines_have_openais_shape() -> None:
    line = parse_batch(
        jsonl([{**chat("a"), "url": COMPLETIONS, "body": {"model": "m", "prompt": "x"}}]), max_lines=1
    )
    body = response_body(
        line[0],
        request_id="cmpl-1",
        created=7,
        text="yz",
        prompt_tokens=3,
        completion_tokens=2,
        finish_reason="length",
        token_ids=[5, 6],
    )
    assert output_line("batch_req_1", "a", "req-1", body) == {
        "id": "batch_req_1",
        "custom_id": "a",
        "response": {
            "status_code": 200,
            "request_id": "req-1",
            "body": {
                "id": "cmpl-1",
                "object": "text_completion",
                "created": 7,
                "model": "m",
                "choices": [
                    {
                        "index": 0,
                        "text": "yz",
                        "logprobs": None,
                        "finish_reason": "length",
                        "token_ids": [5, 6],
                    }
                ],
                "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
            },
        },
        "error": None,
    }
    chat_body = response_body(
        parse_batch(jsonl([chat("b")]), max_lines=1)[0],
        request_id="chatcmpl-1",
        created=7,
        text="ok",
        prompt_tokens=1,
        completion_tokens=1,
        finish_reason="stop",
    )
    assert chat_body["object"] == "chat.completion"
    assert chat_body["choices"] == [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "ok"},
            "logprobs": None,
            "finish_reason": "stop",
        }
    ]
    assert error_line("batch_req_2", "b", "context_length_exceeded", "too long") == {
        "id": "batch_req_2",
        "custom_id": "b",
        "response": None,
        "error": {"code": "context_length_exceeded", "message": "too long"},
    }
