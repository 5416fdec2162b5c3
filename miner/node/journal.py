"""What this node produced, appended to a JSONL file as it goes, so that a node restarted after a crash can
still check, and sign, the results it served before."""

from __future__ import annotations

import json
from pathlib import Path

from client_sdk import openai_batch
from miner.node.executor import Produced


class Journal:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.produced: dict[tuple[int, int], Produced] = {}
        self.created: dict[int, int] = {}  # task id -> the `created` time its result lines carry
        if path.is_file():
            for row in path.read_text().splitlines():
                self._load(json.loads(row))
        path.parent.mkdir(parents=True, exist_ok=True)

    def _load(self, entry: dict[str, object]) -> None:
        task_id, index = int(entry["task_id"]), int(entry["index"])  # type: ignore[call-overload]
        line = openai_batch.parse_line(json.dumps(entry["line"]), index + 1)
        self.produced[(task_id, index)] = Produced(
            line,
            tuple(entry["prompt"]),  # type: ignore[arg-type]
            tuple(entry["output"]),  # type: ignore[arg-type]
            str(entry["text"]),
            str(entry["finish_reason"]),
        )
        self.created[task_id] = int(entry["created"])  # type: ignore[call-overload]

    def record(self, task_id: int, index: int, created: int, produced: Produced) -> None:
        entry = {
            "task_id": task_id,
            "index": index,
            "created": created,
            "line": produced.line.raw,
            "prompt": list(produced.prompt),
            "output": list(produced.output),
            "text": produced.text,
            "finish_reason": produced.finish_reason,
        }
        with self.path.open("a") as handle:
            handle.write(json.dumps(entry) + "\n")
        self.produced[(task_id, index)] = produced
        self.created[task_id] = created
