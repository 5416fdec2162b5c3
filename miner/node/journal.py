"""What this node served, appended to a JSONL file as it goes, so that a node restarted after a crash can
still check, and sign, the results it served before.  A line is journaled as token ids only (its prompt as fed
and its output as produced) and the number of model layers this node ran for it: everything a result line says
besides them (the text, the finish reason, the request it answers) follows from these ids, the model's
tokenizer and the request line, which is how the signer checks it; the layers are this node's work on the
line, which its share of the payment is weighed by."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Served:
    """One request as this node saw it: the prompt it was fed, the output it produced (or passed on) and the
    model layers it ran (0: not recorded, as in journals older than this field)."""

    prompt: tuple[int, ...]
    output: tuple[int, ...]
    layers: int = 0


class Journal:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.served: dict[tuple[int, int], Served] = {}  # (task id, line index) -> what we served
        self._lock = threading.Lock()  # a stage thread and the node's loop both record
        if path.is_file():
            for row in path.read_text().splitlines():
                entry = json.loads(row)
                key = (int(entry["task_id"]), int(entry["index"]))
                self.served[key] = Served(
                    tuple(entry["prompt"]), tuple(entry["output"]), int(entry.get("layers", 0))
                )
        path.parent.mkdir(parents=True, exist_ok=True)

    def record(self, task_id: int, index: int, served: Served) -> None:
        entry = {
            "task_id": task_id,
            "index": index,
            "prompt": list(served.prompt),
            "output": list(served.output),
            "layers": served.layers,
        }
        with self._lock, self.path.open("a") as handle:
            handle.write(json.dumps(entry) + "\n")
            self.served[(task_id, index)] = served
