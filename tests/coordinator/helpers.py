"""Batch files for coordinator tests."""

from __future__ import annotations

import json
import secrets
from typing import Any

from sqlalchemy.orm import Session

from coordinator.db.models import Batch, File, FileContent, Request
from tests.coordinator.conftest import MODEL_NAME


def chat_line(custom_id: str, content: str = "what is the capital of france?", **body: Any) -> dict[str, Any]:
    return {
        "custom_id": custom_id,
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {
            "model": MODEL_NAME,
            "messages": [{"role": "user", "content": content}],
            "max_tokens": 8,
            **body,
        },
    }


def jsonl(lines: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(line) + "\n" for line in lines).encode()


def batch_file(count: int) -> bytes:
    return jsonl([chat_line(f"req-{i}", f"question number {i}?") for i in range(count)])


def padded_batch_file(count: int, padding: int = 1500) -> bytes:
    """Long lines whose prompts still fit the tiny model: each padded with `padding` bytes of JSON blanks."""
    rows = (
        json.dumps(chat_line(f"request-{i}", f"question {i}: " + "many words " * 60)) for i in range(count)
    )
    return "".join(row[:-1] + " " * padding + "}\n" for row in rows).encode()


def running_batch(session: Session, owner: str, requests: int, now: int, content: bytes = b"") -> Batch:
    """An input file (with `content` if given) and an in-progress batch over it, flushed; the request rows and
    work units are the caller's."""
    return stored_batch(session, owner, requests, now, content, status="in_progress")


def stored_batch(
    session: Session,
    owner: str,
    requests: int,
    now: int,
    content: bytes = b"",
    *,
    status: str,
    task_id: int | None = None,
) -> Batch:
    """An input file (with `content` if given) and a batch over it in `status` (for on-chain task `task_id`,
    else a random id), flushed."""
    file = File(
        id="file-" + secrets.token_hex(4),
        owner=owner,
        purpose="batch",
        filename="in.jsonl",
        bytes=len(content) or 1,
        created_at=now,
        line_count=requests,
    )
    session.add(file)
    session.flush()  # no ORM relationship orders the inserts: the batch refers to the file
    if content:
        session.add(FileContent(file_id=file.id, data=content))
    batch = Batch(
        id="batch-" + secrets.token_hex(4),
        owner=owner,
        input_file_id=file.id,
        endpoint="/v1/chat/completions",
        model=MODEL_NAME,
        completion_window="24h",
        task_id=secrets.randbelow(2**32) if task_id is None else task_id,
        status=status,
        created_at=now,
        expires_at=now + 86_400,
        in_progress_at=now if status == "in_progress" else None,
        request_total=requests,
    )
    session.add(batch)
    session.flush()
    return batch


def add_requests(
    session: Session, batch: Batch, lines: list[dict[str, Any]], prompt_tokens: int, max_tokens: int
) -> None:
    """The request rows of the batch's input `lines` (as ingestion stores them), each with these counts."""
    session.add_all(
        Request(
            file_id=batch.input_file_id,
            line_index=index,
            custom_id=line["custom_id"],
            line_hash="0x" + "00" * 32,
            prompt_tokens=prompt_tokens,
            max_tokens=max_tokens,
        )
        for index, line in enumerate(lines)
    )
