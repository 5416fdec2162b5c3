"""A miner that signed a commitment answers for every line of it: an owner's challenge of a line that nobody
answers in time slashes every signer. So the node keeps the whole results tree of each task it signed
(every leaf, checked before signing: miner/node/signer.py) and, once a heartbeat interval, answers each
open challenge of those tasks itself, whatever its coordinator does. It forgets a task once it is settled."""

from __future__ import annotations

import logging

from client_sdk.chain.contracts import LineChallenges, TaskRegistry
from client_sdk.protocol.task import TaskStatus
from client_sdk.results import ResultTrees

log = logging.getLogger("batchmarket.miner")

# A task in one of these is settled: no challenge of it can be open or opened any more.
SETTLED = (TaskStatus.FINALIZED, TaskStatus.CANCELLED, TaskStatus.EXPIRED)


class Answerer:
    """Answers the owner's challenges of the tasks this node signed. `challenges` and `tasks` are bound to
    this miner's key (it sends the answers)."""

    def __init__(self, challenges: LineChallenges, tasks: TaskRegistry) -> None:
        self.challenges = challenges
        self.tasks = tasks
        self._kept: dict[int, ResultTrees] = {}

    @property
    def following(self) -> list[int]:
        """The tasks whose challenges this node still answers."""
        return list(self._kept)

    def signed(self, task_id: int, trees: ResultTrees) -> None:
        """This node signed task `task_id`'s commitment of `trees` (a later signature replaces it)."""
        self._kept[task_id] = trees

    def check(self) -> list[tuple[int, int]]:
        """Answers every open challenge of the kept tasks; forgets the settled ones. Returns the (task, line)
        pairs answered. A chain error propagates (the node's loop tries again next time)."""
        answered = []
        for task_id, trees in list(self._kept.items()):
            status = self.tasks.get_task(task_id).status
            if status in SETTLED:
                del self._kept[task_id]
                continue
            if status != TaskStatus.DISPUTED:
                continue
            open_lines = self.challenges.open_challenges(task_id)
            for index, refusal in self.challenges.answer_from(trees, open_lines).items():
                if refusal is None:
                    log.warning("task %d: answered the owner's challenge of line %d", task_id, index)
                    answered.append((task_id, index))
                else:  # answered by someone else first, most likely
                    log.info("task %d: not answering the challenge of line %d: %s", task_id, index, refusal)
        return answered
