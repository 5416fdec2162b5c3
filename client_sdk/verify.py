"""Checking downloaded results against the chain, so a user trusts neither the coordinator nor the network:

1. the commitment the coordinator reports (results root, usage, payment, amounts, served roots) is the one
   committed on-chain for the task;
2. every assigned miner signed that exact commitment with its own served root (EIP-712, recovering to the
   signer it registered);
3. the input file the coordinator holds hashes to the input root the task committed to at creation;
4. every result line, as downloaded, is the leaf at its index of the committed results sum tree (its
   positional proof verifies for the task's request count), bound to the input line at that index and to the
   token counts it reports, and vouched for by every miner its pipeline names (its proof in that miner's
   served root verifies), so each line can be disputed against the miners who produced it;
5. the usage the task is paid for is what the tree adds up to (every line's proof yields the tree's totals).

Any failure raises ResultsRejected naming the line (or the signature) that failed; an overstated usage raises
WrongUsage, which carries the line that refutes it on-chain.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from client_sdk import bounded_json
from client_sdk.chain.contracts import Market
from client_sdk.eip712 import ResultCommitment, recover_signer
from client_sdk.encoding import hex_bytes
from client_sdk.errors import UserError
from client_sdk.inputs import custom_id_hash, input_leaf, input_tree, line_hash
from client_sdk.merkle import Usage, root_at, verify
from client_sdk.protocol.task import TaskStatus
from client_sdk.results import PROOF_KEY, ZERO_ROOT, LineProof, ResultLeaf, output_hash

COMMITTED = (TaskStatus.RESULTS_COMMITTED, TaskStatus.DISPUTED, TaskStatus.FINALIZED)


class ResultsRejected(UserError):
    """The downloaded results do not match what was committed on-chain."""


class WrongUsage(ResultsRejected):
    """The committed usage (what the task is paid for) is not what the results tree adds up to; `leaf` and
    `proof` refute it on-chain (TaskRegistry.refuteUsage)."""

    def __init__(self, message: str, leaf: ResultLeaf, proof: Sequence[bytes]) -> None:
        super().__init__(message)
        self.leaf = leaf
        self.proof = tuple(proof)


Proof = tuple[bytes, ...]
ServedProofs = tuple[Proof, ...]


@dataclass(frozen=True)
class VerifiedLine:
    """A result line that passed every check, with what a dispute of it needs."""

    line: dict[str, Any]
    leaf: ResultLeaf
    proof: Proof
    served_proofs: ServedProofs


@dataclass(frozen=True)
class CommittedResults:
    """What the chain holds for a task's results, after the commitment and signatures checked out."""

    root: bytes
    input_root: bytes  # the task's: what its input file must hash to
    request_count: int
    served_roots: dict[str, bytes]  # by miner address, lower-case
    usage: Usage  # the tokens the task is paid for


def result_leaf(task_id: int, result_line: dict[str, Any]) -> ResultLeaf:
    """The result leaf a result line stands for: the hash of the line itself and of its custom_id, and the
    index, input hash, token counts and pipeline from its proof fields (KeyError/ValueError/TypeError if
    missing). Whether the input hash is the user's request is `answers`' question."""
    return proven_leaf(task_id, result_line)[0]


def proven_leaf(task_id: int, result_line: dict[str, Any]) -> tuple[ResultLeaf, Proof, ServedProofs]:
    """The line's leaf (as `result_leaf`), with its positional proof in the results tree and, per pipeline
    miner, its proof in that miner's served tree, from one reading of its proof fields."""
    fields = LineProof.from_json(result_line[PROOF_KEY])
    leaf = fields.leaf(task_id, custom_id_hash(str(result_line["custom_id"])), output_hash(result_line))
    return leaf, fields.proof, fields.served_proofs


def answers(leaf: ResultLeaf, request_line: dict[str, Any]) -> bool:
    """Whether `leaf` is bound to this request line: its custom_id and its canonical hash."""
    custom_id = request_line.get("custom_id")
    return (
        isinstance(custom_id, str)
        and leaf.custom_id_hash == custom_id_hash(custom_id)
        and leaf.input_hash == line_hash(request_line)
    )


def is_input_line(
    input_root: bytes, index: int, request_line: dict[str, Any], proof: Sequence[bytes]
) -> bool:
    """Whether `request_line` is line `index` of the input the task committed to (`proof` in its input
    tree)."""
    custom_id = request_line.get("custom_id")
    if not isinstance(custom_id, str) or not 0 <= index < 2**32:
        return False
    return verify(proof, input_root, input_leaf(index, custom_id, line_hash(request_line)))


def check_commitment(
    market: Market, task_id: int, commitment: dict[str, Any], signatures: Sequence[dict[str, str]]
) -> CommittedResults:
    """Checks the commitment against the chain and the signature of every assigned miner that is paid or
    vouches for lines."""
    task = market.tasks.get_task(task_id)
    if task.status not in COMMITTED:
        raise ResultsRejected(
            f"task {task_id} has no results committed on-chain (it is {task.status.name.lower()})"
        )
    try:
        claimed = ResultCommitment.from_json(task_id, commitment)
    except ValueError as exc:
        raise ResultsRejected(f"task {task_id}: {exc}") from None
    on_chain = (task.results_root, task.input_tokens, task.output_tokens, task.payment)
    if (claimed.results_root, claimed.input_tokens, claimed.output_tokens, claimed.payment) != on_chain:
        raise ResultsRejected(f"task {task_id}: the coordinator's commitment differs from the one on-chain")
    if list(claimed.miner_amounts) != market.tasks.miner_amounts_of(task_id):
        raise ResultsRejected(f"task {task_id}: the miners' amounts differ from the ones on-chain")
    if list(claimed.served_roots) != market.tasks.served_roots_of(task_id):
        raise ResultsRejected(f"task {task_id}: the miners' served roots differ from the ones on-chain")
    by_miner = {s["miner"].lower(): s["signature"] for s in signatures}
    chain_id = market.w3.eth.chain_id
    miners = market.tasks.miners_of(task_id)
    if list(claimed.miners) != miners or claimed.request_count != task.request_count:
        raise ResultsRejected(f"task {task_id}: the commitment names other miners or another request count")
    signers = market.tasks.signers_of(task_id)  # each as it accepted the task: the key the chain checked
    for index, miner in enumerate(miners):
        signature = by_miner.get(miner.lower())
        if signature is None and not claimed.needs_signature(index):
            continue  # paid nothing, vouching for nothing: the chain took the commitment without it
        if signature is None:
            raise ResultsRejected(f"task {task_id}: no signature from miner {miner}")
        signer = signers[index]
        try:
            recovered = recover_signer(
                hex_bytes(signature), claimed, miner, chain_id, market.deployment.task_registry
            )
        except Exception as exc:  # malformed signature bytes
            raise ResultsRejected(f"task {task_id}: miner {miner}'s signature is malformed") from exc
        if recovered.lower() != signer.lower():
            raise ResultsRejected(
                f"task {task_id}: miner {miner}'s signature is not by the signer it accepted the task with"
            )
    served = {m.lower(): root for m, root in zip(miners, claimed.served_roots, strict=True)}
    return CommittedResults(
        claimed.results_root,
        task.input_root,
        task.request_count,
        served,
        Usage(task.input_tokens, task.output_tokens),
    )


def check_inputs(task_id: int, input_root: bytes, input_data: bytes) -> list[dict[str, Any]]:
    """The input lines, after checking they hash to the input root the task committed to (read by the
    caller, with the rest of the task)."""
    try:
        lines = [bounded_json.loads(row) for row in input_data.decode().rstrip("\n").split("\n")]
    except ValueError as exc:  # malformed, too deep or not UTF-8
        raise ResultsRejected(f"task {task_id}: the input file is malformed ({exc})") from None
    if input_tree(lines).root != input_root:
        raise ResultsRejected(f"task {task_id}: the input file does not match the input root on-chain")
    return lines


def check_lines(
    task_id: int, committed: CommittedResults, rows: bytes, inputs: list[dict[str, Any]]
) -> list[VerifiedLine]:
    """Every line of an output or error file, checked against the committed trees and the inputs."""
    verified = []
    for number, row in enumerate(rows.decode().splitlines(), start=1):
        where = f"result line {number}"
        try:
            line = bounded_json.loads(row)
            custom_id = str(line["custom_id"])
            where += f" (custom_id {custom_id!r})"
            leaf, proof, served_proofs = proven_leaf(task_id, line)
            index = leaf.request_index
        except (ValueError, KeyError, TypeError) as exc:
            raise ResultsRejected(f"{where}: malformed ({exc})") from exc
        if not 0 <= index < len(inputs) or inputs[index].get("custom_id") != custom_id:
            raise ResultsRejected(f"{where}: does not answer input line {index + 1}")
        if not answers(leaf, inputs[index]):
            raise ResultsRejected(f"{where}: is bound to a different request than input line {index + 1}")
        usage = ((line.get("response") or {}).get("body") or {}).get("usage")
        if usage and (usage.get("prompt_tokens"), usage.get("completion_tokens")) != (
            leaf.input_tokens,
            leaf.output_tokens,
        ):
            raise ResultsRejected(f"{where}: its usage differs from the committed token counts")
        leaf_hash = leaf.hash()
        found = root_at(proof, leaf_hash, leaf.usage, index, committed.request_count)
        if found is None or found[0] != committed.root:
            raise ResultsRejected(f"{where}: not part of the results committed on-chain (tampered?)")
        if found[1] != committed.usage:
            total, paid = found[1], committed.usage
            raise WrongUsage(
                f"task {task_id}: the results add up to {total.input_tokens} input and {total.output_tokens} "
                f"output tokens, but the task is paid for {paid.input_tokens} and {paid.output_tokens}: "
                f"refute it with `arbitration refute-usage --batch BATCH_ID`",
                leaf,
                proof,
            )
        if len(served_proofs) != len(leaf.pipeline):
            raise ResultsRejected(f"{where}: malformed (one served proof per pipeline miner expected)")
        for miner, served_proof in zip(leaf.pipeline, served_proofs, strict=True):
            served_root = committed.served_roots.get(miner.lower(), ZERO_ROOT)
            if served_root == ZERO_ROOT or not verify(served_proof, served_root, leaf_hash):
                raise ResultsRejected(f"{where}: miner {miner}, named on its pipeline, did not vouch for it")
        verified.append(VerifiedLine(line, leaf, proof, served_proofs))
    return verified
