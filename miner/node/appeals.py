"""A miner convicted over a line it served correctly appeals. Juries can err (a small or lopsided draw,
jurors who stayed silent), and the cost to corrupt a jury assumes the losing side appeals while it can; a node
that never did left every wrong conviction standing. Once a heartbeat interval the node looks at the open
disputes of the tasks it signed and appeals a round when all of these hold:

- it is one of the dispute's accountable miners (its pipeline), and the disputed leaf is the very leaf of the
  results tree it checked and signed (miner/node/signer.py: only after its own lines matched its journal);
- its journal shows it ran every layer of the model for that line, so the line's tokens are its own work and
  correct by construction (a stage that ran part of the model cannot know what the other stages did);
- the round was drawn and lost (more seats at fault than correct), it is in its appeal phase, and it is not
  the last round;
- the appeal's bond (twice the round's) is within the bound: by default the stake lock the conviction would
  take (an appeal that costs more than the conviction takes is not worth it), else `max_bond`; the wallet pays
  it, from its escrow balance when the wallet alone holds too little.

Each round is decided once: a refusal is logged once, an appeal sent once (the contract takes one a round)."""

from __future__ import annotations

import logging

from client_sdk.chain.contracts import Market
from client_sdk.chain.types import LAST_ROUND, DisputeStatus, Phase
from miner.node.challenges import Answerer
from miner.node.journal import Journal

log = logging.getLogger("batchmarket.miner")


class Appealer:
    """Appeals lost rounds of disputes over lines this node served whole. `market` is bound to this miner's
    key; `answerer` holds the trees it signed and, from its latest check (the node's loop runs it just
    before), which of their tasks are disputed; `layers` is the model's layer count."""

    def __init__(
        self, market: Market, answerer: Answerer, journal: Journal, layers: int, max_bond: int | None = None
    ) -> None:
        self.market = market
        self.answerer = answerer
        self.journal = journal
        self.layers = layers
        self.max_bond = max_bond
        self._decided: set[tuple[int, int]] = set()  # (dispute, round) appealed or refused once

    def check(self) -> list[int]:
        """Appeals every round the policy above allows; returns the disputes appealed. A chain error
        propagates (the node's loop tries again next time)."""
        appealed = []
        for task_id in self.answerer.disputed:
            owner_dispute = self.market.arbitration.dispute_of_task(task_id)
            audit_dispute = self.market.audits.audit_of(task_id).dispute_id
            for dispute_id in {owner_dispute, audit_dispute} - {0}:
                if self._appeal_if_due(task_id, dispute_id):
                    appealed.append(dispute_id)
        return appealed

    def _appeal_if_due(self, task_id: int, dispute_id: int) -> bool:
        arbitration = self.market.arbitration
        dispute = arbitration.get_dispute(dispute_id)
        r = dispute.round
        if dispute.status != DisputeStatus.OPEN or (dispute_id, r) in self._decided or r >= LAST_ROUND:
            return False
        current = arbitration.round_of(dispute_id, r)
        if current.phase(self.market.chain_time()) != Phase.APPEAL:
            return False
        if current.votes_at_fault <= current.votes_correct:
            return False  # not convicted in this round
        if self.market.address not in arbitration.pipeline_of(dispute_id):
            return False
        line = dispute.request_index
        refusal = self._refusal(task_id, line, dispute.leaf_hash, 2 * current.bond)
        what = f"dispute {dispute_id} (task {task_id} line {line}) round {r}"
        if refusal is not None:
            self._decided.add((dispute_id, r))
            log.warning("%s convicted this node; not appealing: %s", what, refusal)
            return False
        self.market.appeal_paying(dispute_id, 2 * current.bond)  # a chain error propagates: tried again
        self._decided.add((dispute_id, r))
        log.warning(
            "%s convicted this node %d seats to %d over a line it served whole: appealed (bond %s)",
            what,
            current.votes_at_fault,
            current.votes_correct,
            self.market.amount(2 * current.bond),
        )
        return True

    def _refusal(self, task_id: int, line: int, leaf_hash: bytes, bond: int) -> str | None:
        """Why this node does not appeal the conviction over `line`, or None."""
        tree = self.answerer.tree_of(task_id)
        if tree is None or not 0 <= line < len(tree.leaves) or tree.leaves[line].hash() != leaf_hash:
            return "the disputed leaf is not the one this node signed"
        served = self.journal.served.get((task_id, line))
        if served is None or served.layers < self.layers:
            ran = 0 if served is None else served.layers
            return f"it ran {ran} of the model's {self.layers} layers of the line: it cannot vouch for all"
        return self.market.appeal_bond_refusal(task_id, bond, self.max_bond)
