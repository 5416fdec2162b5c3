"""What this node served, appended to a JSONL file as it goes, so that a node restarted after a crash can
still check, and sign, the results it served before.  A line is journaled as token ids only (its prompt as fed
and its output as produced) and the number of model layers this node ran for it: everything a result line says
besides them (the text, the finish reason, the request it answers) follows from these ids, the model's
tokenizer and the request line, which is how the signer checks it; the layers are this node's work on the
line, which its share of the payment is weighed by.

The journal also keeps the tasks this node accepted, with their line counts: a stage journals a line a peer
says finished only for a line of such a task (a previous stage can name any task and line in its frames), and
the first record of a line stands: a later, different one is not taken (an honest pipeline serves a line to
the same tokens every time), so no peer can make the node disown a line it served, or grow its journal past
the lines of the tasks it took."""

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
        self.tasks: dict[int, int] = {}  # task id -> its line count, for the tasks this node accepted
        self._lock = threading.Lock()  # a stage thread and the node's loop both record
        if path.is_file():
            for row in path.read_text().splitlines():
                entry = json.loads(row)
                if "lines" in entry:
                    self.tasks[int(entry["task_id"])] = int(entry["lines"])
                    continue
                key = (int(entry["task_id"]), int(entry["index"]))
                self.served.setdefault(
                    key, Served(tuple(entry["prompt"]), tuple(entry["output"]), int(entry.get("layers", 0)))
                )
        path.parent.mkdir(parents=True, exist_ok=True)

    def accept(self, task_id: int, lines: int) -> None:
        """Notes that this node took task `task_id` of `lines` lines: its lines may be journaled."""
        with self._lock:
            if self.tasks.get(task_id) == lines:
                return
            self._append({"task_id": task_id, "lines": lines})
            self.tasks[task_id] = lines

    def covers(self, task_id: int, index: int) -> bool:
        """Whether `index` is a line of a task this node accepted."""
        return 0 <= index < self.tasks.get(task_id, 0)

    def record(self, task_id: int, index: int, served: Served) -> bool:
        """Journals what this node served of a line; False (and nothing written) if the line has a record
        already that differs in its tokens (the first stands)."""
        entry = {
            "task_id": task_id,
            "index": index,
            "prompt": list(served.prompt),
            "output": list(served.output),
            "layers": served.layers,
        }
        with self._lock:
            known = self.served.get((task_id, index))
            if known is not None:
                return (known.prompt, known.output) == (served.prompt, served.output)
            self._append(entry)
            self.served[(task_id, index)] = served
        return True

    def _append(self, entry: dict[str, object]) -> None:
        with self.path.open("a") as handle:
            handle.write(json.dumps(entry) + "\n")
