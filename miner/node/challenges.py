"""A miner that signed a commitment answers for every line of it: an owner's challenge of a line that nobody
answers in time slashes every signer. So the node keeps the whole results tree of each task it signed
(every leaf, checked before signing: miner/node/signer.py) and, once a heartbeat interval, answers each
open challenge of those tasks itself, whatever its coordinator does. It forgets a task once it is settled.
With a directory to keep them in, the trees outlive a restart of the node (one JSON file per task)."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from client_sdk import bounded_json
from client_sdk.chain.contracts import LineChallenges, TaskRegistry
from client_sdk.protocol.constants import MAX_BATCH_LINES, MAX_MINERS_PER_TASK
from client_sdk.protocol.fields import addresses, field
from client_sdk.protocol.task import TaskStatus
from client_sdk.results import ResultLeaf, ResultTrees

log = logging.getLogger("batchmarket.miner")

# A task in one of these is settled: no challenge of it can be open or opened any more.
SETTLED = (TaskStatus.FINALIZED, TaskStatus.CANCELLED, TaskStatus.EXPIRED)


class Answerer:
    """Answers the owner's challenges of the tasks this node signed. `challenges` and `tasks` are bound to
    this miner's key (it sends the answers); `keep_dir`, if given, holds the trees across restarts."""

    def __init__(self, challenges: LineChallenges, tasks: TaskRegistry, keep_dir: Path | None = None) -> None:
        self.challenges = challenges
        self.tasks = tasks
        self.keep_dir = keep_dir
        self._kept: dict[int, ResultTrees] = {}
        # the kept tasks that were disputed (a challenge or a dispute open) at the last check: the appealer
        # looks at these only, without reading every task's status again
        self.disputed: list[int] = []
        if keep_dir is not None:
            keep_dir.mkdir(parents=True, exist_ok=True)
            for path in sorted(keep_dir.glob("*.json")):
                self._load(path)

    @property
    def following(self) -> list[int]:
        """The tasks whose challenges this node still answers."""
        return list(self._kept)

    def tree_of(self, task_id: int) -> ResultTrees | None:
        """The results trees this node signed for task `task_id`, while it follows the task."""
        return self._kept.get(task_id)

    def signed(self, task_id: int, trees: ResultTrees) -> None:
        """This node signed task `task_id`'s commitment of `trees` (a later signature replaces it); kept on
        disk, when it has a directory, before the signature is handed over."""
        self._kept[task_id] = trees
        if self.keep_dir is not None:
            path = self.keep_dir / f"{task_id}.json"
            scratch = path.with_suffix(".tmp")
            document = {"miners": list(trees.miners), "leaves": [leaf.to_json() for leaf in trees.leaves]}
            scratch.write_text(json.dumps(document))
            os.replace(scratch, path)  # whole or not at all

    def _forget(self, task_id: int) -> None:
        del self._kept[task_id]
        if self.keep_dir is not None:
            (self.keep_dir / f"{task_id}.json").unlink(missing_ok=True)

    def _load(self, path: Path) -> None:
        """The tree kept in `path` (named by its task id); a file that is not one is logged and left."""
        what = f"the kept tree {path.name}"
        try:
            task_id = int(path.stem)
            document = bounded_json.loads(path.read_text())
            leaves = field(document, "leaves", list, what)
            if len(leaves) > MAX_BATCH_LINES:
                raise ValueError(f"{what} has more than {MAX_BATCH_LINES} leaves")
            miners = addresses(field(document, "miners", list, what), "miners", what, MAX_MINERS_PER_TASK)
            trees = ResultTrees([ResultLeaf.from_json(task_id, leaf) for leaf in leaves], miners)
        except (OSError, ValueError) as exc:
            log.error("not answering for %s: %s", path, exc)
            return
        self._kept[task_id] = trees

    def check(self) -> list[tuple[int, int]]:
        """Answers every open challenge of the kept tasks; forgets the settled ones. Returns the (task, line)
        pairs answered. A chain error propagates (the node's loop tries again next time)."""
        answered, disputed = [], []
        for task_id, trees in list(self._kept.items()):
            status = self.tasks.get_task(task_id).status
            if status in SETTLED:
                self._forget(task_id)
                continue
            if status != TaskStatus.DISPUTED:
                continue
            disputed.append(task_id)
            open_lines = self.challenges.open_challenges(task_id)
            for index, refusal in self.challenges.answer_from(trees, open_lines).items():
                if refusal is None:
                    log.warning("task %d: answered the owner's challenge of line %d", task_id, index)
                    answered.append((task_id, index))
                else:  # answered by someone else first, most likely
                    log.info("task %d: not answering the challenge of line %d: %s", task_id, index, refusal)
        self.disputed = disputed
        return answered
