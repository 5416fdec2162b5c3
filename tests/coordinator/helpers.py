"""Batch files for coordinator tests."""

from __future__ import annotations

import json
from typing import Any

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
