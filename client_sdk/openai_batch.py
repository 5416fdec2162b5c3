"""OpenAI Batch files: parse and validate input lines, render prompts to token ids, build output lines.

Pure: the coordinator validates uploads with it, `miner run-local` reads and writes files with it, and the SDK
checks downloads with it. Every error names the 1-based line it is about.
"""

from __future__ import annotations

import json
import mmap
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from client_sdk import bounded_json
from client_sdk.errors import UserError
from client_sdk.protocol.constants import MAX_SEED
from client_sdk.protocol.fields import is_int, is_number

CHAT = "/v1/chat/completions"
COMPLETIONS = "/v1/completions"
SUPPORTED_URLS = (CHAT, COMPLETIONS)
DEFAULT_MAX_TOKENS = 512
MAX_CUSTOM_ID = 512
ROLES = ("system", "user", "assistant")
LINE_KEYS = {"custom_id", "method", "url", "body"}
COMMON_BODY_KEYS = {"model", "max_tokens", "temperature", "top_p", "seed", "n", "user"}
BODY_KEYS = {
    CHAT: COMMON_BODY_KEYS | {"messages", "max_completion_tokens"},
    COMPLETIONS: COMMON_BODY_KEYS | {"prompt"},
}
COUNT_PIECE = 1 << 20

FileBytes = bytes | mmap.mmap  # a batch file read into memory, or mapped from disk (a large upload)


class BatchFormatError(UserError):
    """A batch file or line that cannot be accepted; the message names the line."""


@dataclass(frozen=True)
class BatchLine:
    """One validated request. `raw` is the parsed line as given (what the input leaf hashes)."""

    line_number: int
    custom_id: str
    url: str
    model: str
    max_tokens: int
    temperature: float
    top_p: float
    seed: int | None
    messages: tuple[tuple[str, str], ...]  # chat: (role, content) pairs
    prompt: str | tuple[int, ...]  # completions: text, or token ids given as such
    raw: dict[str, Any]


class Tokenizer(Protocol):
    """The part of a Hugging Face tokenizer we use."""

    def encode(self, text: str, add_special_tokens: bool = ...) -> list[int]: ...

    def apply_chat_template(
        self, conversation: Any, *, tokenize: bool, add_generation_prompt: bool
    ) -> Any: ...


@dataclass(frozen=True)
class LineProblem:
    """A line that cannot be served, with its custom_id when it has a readable one."""

    line_number: int
    custom_id: str | None
    message: str  # "line N: ..."


def parse_batch(data: bytes, *, max_lines: int) -> list[BatchLine]:
    """Every line of a batch file, validated; raises BatchFormatError at the first problem."""
    return list(iter_batch(data, max_lines=max_lines))


def iter_batch(data: FileBytes, *, max_lines: int) -> Iterator[BatchLine]:
    """The lines of a batch file one at a time, each validated as it is reached (a large file is never held
    parsed whole); raises BatchFormatError at the first problem, naming its line."""
    seen: dict[str, int] = {}
    for number, row in iter_rows(data, max_lines=max_lines):
        parsed = parse_line(row, number)
        repeated = _repeated(seen, parsed, number)
        if repeated:
            raise BatchFormatError(repeated)
        yield parsed


def read_batch(data: bytes, *, max_lines: int) -> tuple[list[BatchLine], list[LineProblem]]:
    """Each line validated on its own: the good ones, and what is wrong with each of the others. Problems of
    the whole file (not UTF-8, empty, too many lines) raise BatchFormatError."""
    lines: list[BatchLine] = []
    problems: list[LineProblem] = []
    seen: dict[str, int] = {}
    for number, row in iter_rows(data, max_lines=max_lines):
        try:
            parsed = parse_line(row, number)
        except BatchFormatError as exc:
            problems.append(LineProblem(number, _readable_custom_id(row), str(exc)))
            continue
        repeated = _repeated(seen, parsed, number)
        if repeated:
            problems.append(LineProblem(number, parsed.custom_id, repeated))
            continue
        lines.append(parsed)
    return lines, problems


def iter_rows(data: FileBytes, *, max_lines: int) -> Iterator[tuple[int, str]]:
    """(line number, text) of each line of a batch file, decoded one at a time. An empty file, one of more
    than `max_lines` lines (counted before any is read) and a line that is not UTF-8 raise BatchFormatError;
    the newline ending the last line starts no line."""
    count = _line_count(data)
    if not count:
        raise BatchFormatError("the file is empty")
    if count > max_lines:
        raise BatchFormatError(f"the file has {count} lines; the limit is {max_lines}")
    start = 0
    for number in range(1, count + 1):
        end = data.find(b"\n", start)
        end = len(data) if end < 0 else end
        try:
            row = data[start:end].decode("utf-8")
        except UnicodeDecodeError:
            raise BatchFormatError(f"line {number}: the file is not UTF-8 text") from None
        yield number, row
        start = end + 1


def _line_count(data: FileBytes) -> int:
    """The lines of a file: its newlines, counted a MiB at a time (a mapped file has no `count`), and a last
    line that has none."""
    newlines = sum(data[at : at + COUNT_PIECE].count(b"\n") for at in range(0, len(data), COUNT_PIECE))
    return newlines + (0 if not data or data[-1:] == b"\n" else 1)


def _repeated(seen: dict[str, int], line: BatchLine, number: int) -> str | None:
    """The problem of a custom_id an earlier line has (None, and it is remembered, when it is new)."""
    if line.custom_id in seen:
        return f"line {number}: custom_id {line.custom_id!r} repeats line {seen[line.custom_id]}"
    seen[line.custom_id] = number
    return None


def _readable_custom_id(row: str) -> str | None:
    try:
        raw = bounded_json.loads(row)
    except ValueError:  # malformed or too deep
        return None
    custom_id = raw.get("custom_id") if isinstance(raw, dict) else None
    return custom_id if isinstance(custom_id, str) and 0 < len(custom_id) <= MAX_CUSTOM_ID else None


def parse_line(row: str, number: int) -> BatchLine:
    def fail(reason: str) -> BatchFormatError:
        return BatchFormatError(f"line {number}: {reason}")

    if not row.strip():
        raise fail("the line is empty")
    try:
        raw = bounded_json.loads(row)
    except json.JSONDecodeError as exc:
        raise fail(f"malformed JSON ({exc.msg} at column {exc.colno})") from exc
    except bounded_json.OutOfBounds as exc:
        raise fail(str(exc)) from exc
    if not isinstance(raw, dict):
        raise fail("a request line must be a JSON object")
    if (where := _unencodable(raw, "")) is not None:
        raise fail(f"{where} holds a lone UTF-16 surrogate (a \\ud800-\\udfff escape without its pair)")
    unknown = sorted(set(raw) - LINE_KEYS)
    if unknown:
        raise fail(f"unknown field {unknown[0]!r}")
    custom_id = raw.get("custom_id")
    if not isinstance(custom_id, str) or not 1 <= len(custom_id) <= MAX_CUSTOM_ID or "\x00" in custom_id:
        raise fail(f"custom_id must be a string of 1 to {MAX_CUSTOM_ID} characters, none of them NUL")
    if raw.get("method") != "POST":
        raise fail("method must be 'POST'")
    url = raw.get("url")
    if url not in SUPPORTED_URLS:
        raise fail(f"unsupported url {url!r}; supported: {', '.join(SUPPORTED_URLS)}")
    body = raw.get("body")
    if not isinstance(body, dict):
        raise fail("body must be a JSON object")
    unknown = sorted(set(body) - BODY_KEYS[url])
    if unknown:
        raise fail(f"body.{unknown[0]} is not supported for {url}")
    model = body.get("model")
    if not isinstance(model, str) or not model.strip() or "\x00" in model:
        raise fail("body.model must name a model")
    if body.get("n", 1) != 1:
        raise fail("body.n must be 1 (one completion per request)")
    if "user" in body and not isinstance(body["user"], str):
        raise fail("body.user must be a string")
    messages: tuple[tuple[str, str], ...] = ()
    prompt: str | tuple[int, ...] = ""
    if url == CHAT:
        messages = _messages(body.get("messages"), fail)
        max_tokens = _integer(
            body, ("max_completion_tokens", "max_tokens"), 1, 1 << 31, DEFAULT_MAX_TOKENS, fail
        )
    else:
        prompt = _prompt(body.get("prompt"), fail)
        max_tokens = _integer(body, ("max_tokens",), 1, 1 << 31, DEFAULT_MAX_TOKENS, fail)
    seed = body.get("seed")
    if seed is not None and (not is_int(seed) or not 0 <= seed <= MAX_SEED):
        raise fail(f"body.seed must be an integer from 0 to {MAX_SEED}")
    return BatchLine(
        line_number=number,
        custom_id=custom_id,
        url=url,
        model=model,
        max_tokens=max_tokens,
        temperature=_number(body, "temperature", 0.0, 2.0, 1.0, fail),
        top_p=_number(body, "top_p", 0.0, 1.0, 1.0, fail, open_low=True),
        seed=seed,
        messages=messages,
        prompt=prompt,
        raw=raw,
    )


def _integer(body: dict[str, Any], keys: Sequence[str], low: int, high: int, default: int, fail: Any) -> int:
    present = [key for key in keys if body.get(key) is not None]
    if len(present) > 1:
        raise fail(f"give only one of body.{' or body.'.join(present)}")
    if not present:
        return default
    value = body[present[0]]
    if not is_int(value) or not low <= value <= high:
        raise fail(f"body.{present[0]} must be an integer from {low} to {high}")
    return int(value)


def _number(
    body: dict[str, Any], key: str, low: float, high: float, default: float, fail: Any, open_low: bool = False
) -> float:
    value = body.get(key)
    if value is None:
        return default
    if not is_number(value):
        raise fail(f"body.{key} must be a number")
    if not (low < value if open_low else low <= value) or value > high:
        bound = f"above {low}" if open_low else f"from {low}"
        raise fail(f"body.{key} must be {bound} to {high}")
    return float(value)


def _unencodable(value: object, path: str) -> str | None:
    """Where the first string of `value` (a key or a value) that is not Unicode text is: a lone surrogate,
    which a JSON escape can write and UTF-8 cannot. None if there is none. `value` is bounded in depth, and
    the path names only keys already found to be text."""
    if isinstance(value, str):
        return None if _is_text(value) else path
    if isinstance(value, dict):
        for key, item in value.items():
            if not _is_text(key):
                return f"a key of {path or 'the line'}"
            if (found := _unencodable(item, f"{path}.{key}" if path else key)) is not None:
                return found
    if isinstance(value, list):
        for index, item in enumerate(value):
            if (found := _unencodable(item, f"{path}[{index}]")) is not None:
                return found
    return None


def _is_text(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _prompt(value: object, fail: Any) -> str | tuple[int, ...]:
    if isinstance(value, str) and value:
        return value
    if isinstance(value, list) and value and all(is_int(t) and t >= 0 for t in value):
        return tuple(value)
    raise fail("body.prompt must be a non-empty string or a non-empty list of token ids")


def _messages(value: object, fail: Any) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, list) or not value:
        raise fail("body.messages must be a non-empty list")
    out = []
    for i, message in enumerate(value):
        if not isinstance(message, dict) or set(message) - {"role", "content", "name"}:
            raise fail(f"body.messages[{i}] must be an object with role and content")
        role, content = message.get("role"), message.get("content")
        if role not in ROLES:
            raise fail(f"body.messages[{i}].role must be one of {', '.join(ROLES)}")
        if isinstance(content, list):  # OpenAI's content parts: only text is served here
            if not all(
                isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)
                for p in content
            ):
                raise fail(f"body.messages[{i}].content parts must all be text")
            content = "".join(p["text"] for p in content)
        if not isinstance(content, str):
            raise fail(f"body.messages[{i}].content must be a string")
        out.append((role, content))
    return tuple(out)


def prompt_token_ids(tokenizer: Tokenizer, line: BatchLine) -> list[int]:
    """The prompt a model sees: the chat template with the assistant turn opened, or the raw prompt."""
    if line.url == CHAT:
        conversation = [{"role": role, "content": content} for role, content in line.messages]
        ids = tokenizer.apply_chat_template(conversation, tokenize=True, add_generation_prompt=True)
        if isinstance(ids, dict) or hasattr(ids, "input_ids"):  # transformers 5 returns a BatchEncoding
            ids = ids["input_ids"]
        return [int(t) for t in ids]
    if isinstance(line.prompt, tuple):
        return list(line.prompt)
    return [int(t) for t in tokenizer.encode(line.prompt, add_special_tokens=True)]


def response_body(
    line: BatchLine,
    *,
    request_id: str,
    created: int,
    text: str,
    prompt_tokens: int,
    completion_tokens: int,
    finish_reason: str,
    token_ids: Sequence[int] | None = None,
    seed: int | None = None,
) -> dict[str, Any]:
    """The completion object OpenAI would return for this request; `token_ids` (the generated ids) are added
    to the choice and `seed` (what the line was sampled with: client_sdk/protocol/sampling.py) to the object
    when given."""
    usage = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    if line.url == CHAT:
        choice: dict[str, Any] = {
            "index": 0,
            "message": {"role": "assistant", "content": text},
            "logprobs": None,
            "finish_reason": finish_reason,
        }
        kind = "chat.completion"
    else:
        choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason}
        kind = "text_completion"
    if token_ids is not None:
        choice["token_ids"] = list(token_ids)
    body = {
        "id": request_id,
        "object": kind,
        "created": created,
        "model": line.model,
        "choices": [choice],
        "usage": usage,
    }
    if seed is not None:
        body["seed"] = seed
    return body


def output_line(line_id: str, custom_id: str, request_id: str, body: dict[str, Any]) -> dict[str, Any]:
    """A line of the output file for a request that succeeded."""
    return {
        "id": line_id,
        "custom_id": custom_id,
        "response": {"status_code": 200, "request_id": request_id, "body": body},
        "error": None,
    }


def error_line(line_id: str, custom_id: str | None, code: str, message: str) -> dict[str, Any]:
    """A line of the error file for a request that could not be served."""
    return {
        "id": line_id,
        "custom_id": custom_id,
        "response": None,
        "error": {"code": code, "message": message},
    }
