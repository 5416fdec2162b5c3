"""Checking downloaded results against the chain, so a user trusts neither the coordinator nor the network:

1. the results root the coordinator reports is the one committed on-chain for the task;
2. every assigned miner signed that exact commitment (EIP-712, recovering to the signer it registered);
3. the input file the coordinator holds hashes to the input root the task committed to at creation;
4. every result line, as downloaded, is a leaf of the committed tree (its Merkle proof verifies), bound to the
   input line at its index and to the token counts it reports.

Any failure raises ResultsRejected naming the line (or the signature) that failed.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from eth_utils.address import to_checksum_address

from client_sdk.chain.contracts import Market
from client_sdk.chain.types import TaskStatus
from client_sdk.eip712 import ResultCommitment, recover_signer
from client_sdk.errors import UserError
from client_sdk.inputs import custom_id_hash, input_tree, line_hash
from client_sdk.merkle import verify
from client_sdk.results import PROOF_KEY, ResultLeaf, output_hash

COMMITTED = (TaskStatus.RESULTS_COMMITTED, TaskStatus.DISPUTED, TaskStatus.FINALIZED)


class ResultsRejected(UserError):
    """The downloaded results do not match what was committed on-chain."""


@dataclass(frozen=True)
class VerifiedLine:
    """A result line that passed every check, with what a dispute of it needs."""

    line: dict[str, Any]
    leaf: ResultLeaf
    proof: tuple[bytes, ...]


def _hex(value: str) -> bytes:
    return bytes.fromhex(value.removeprefix("0x"))


def result_leaf(task_id: int, request_line: dict[str, Any], result_line: dict[str, Any]) -> ResultLeaf:
    """The result leaf a request line and its result line stand for: the hashes of the lines themselves, the
    index, token counts and pipeline from the result line's proof fields (KeyError/ValueError if missing)."""
    proof = result_line[PROOF_KEY]
    return ResultLeaf(
        task_id=task_id,
        request_index=int(proof["index"]),
        custom_id_hash=custom_id_hash(str(result_line["custom_id"])),
        input_hash=line_hash(request_line),
        output_hash=output_hash(result_line),
        input_tokens=int(proof["input_tokens"]),
        output_tokens=int(proof["output_tokens"]),
        pipeline=tuple(to_checksum_address(miner) for miner in proof["pipeline"]),
    )


def check_commitment(
    market: Market, task_id: int, commitment: dict[str, Any], signatures: Sequence[dict[str, str]]
) -> bytes:
    """Checks the commitment against the chain and every assigned miner's signature; returns the root."""
    task = market.tasks.get_task(task_id)
    if task.status not in COMMITTED:
        raise ResultsRejected(
            f"task {task_id} has no results committed on-chain (it is {task.status.name.lower()})"
        )
    claimed = ResultCommitment(
        task_id=task_id,
        results_root=_hex(commitment["results_root"]),
        input_tokens=int(commitment["input_tokens"]),
        output_tokens=int(commitment["output_tokens"]),
        payment=int(commitment["payment"]),
        miner_amounts=tuple(int(a) for a in commitment["miner_amounts"]),
    )
    on_chain = (task.results_root, task.input_tokens, task.output_tokens, task.payment)
    if (claimed.results_root, claimed.input_tokens, claimed.output_tokens, claimed.payment) != on_chain:
        raise ResultsRejected(f"task {task_id}: the coordinator's commitment differs from the one on-chain")
    if list(claimed.miner_amounts) != market.tasks.miner_amounts_of(task_id):
        raise ResultsRejected(f"task {task_id}: the miners' amounts differ from the ones on-chain")
    by_miner = {s["miner"].lower(): s["signature"] for s in signatures}
    chain_id = market.w3.eth.chain_id
    for miner in market.tasks.miners_of(task_id):
        signature = by_miner.get(miner.lower())
        if signature is None:
            raise ResultsRejected(f"task {task_id}: no signature from miner {miner}")
        signer = market.registry.profile_of(miner).signer
        try:
            recovered = recover_signer(_hex(signature), claimed, chain_id, market.deployment.task_registry)
        except Exception as exc:  # malformed signature bytes
            raise ResultsRejected(f"task {task_id}: miner {miner}'s signature is malformed") from exc
        if recovered.lower() != signer.lower():
            raise ResultsRejected(
                f"task {task_id}: miner {miner}'s signature is not by its registered signer"
            )
    return claimed.results_root


def check_inputs(market: Market, task_id: int, input_data: bytes) -> list[dict[str, Any]]:
    """The input lines, after checking they hash to the input root the task committed to."""
    lines = [json.loads(row) for row in input_data.decode().rstrip("\n").split("\n")]
    if input_tree(lines).root != market.tasks.get_task(task_id).input_root:
        raise ResultsRejected(f"task {task_id}: the input file does not match the input root on-chain")
    return lines


def check_lines(task_id: int, root: bytes, rows: bytes, inputs: list[dict[str, Any]]) -> list[VerifiedLine]:
    """Every line of an output or error file, checked against the root and the inputs."""
    verified = []
    for number, row in enumerate(rows.decode().splitlines(), start=1):
        where = f"result line {number}"
        try:
            line = json.loads(row)
            extra = line[PROOF_KEY]
            index = int(extra["index"])
            custom_id = str(line["custom_id"])
            where += f" (custom_id {custom_id!r})"
            claimed_input_hash = _hex(extra["input_hash"])
            proof = tuple(_hex(p) for p in extra["proof"])
        except (ValueError, KeyError, TypeError) as exc:
            raise ResultsRejected(f"{where}: malformed ({exc})") from exc
        if not 0 <= index < len(inputs) or inputs[index].get("custom_id") != custom_id:
            raise ResultsRejected(f"{where}: does not answer input line {index + 1}")
        if line_hash(inputs[index]) != claimed_input_hash:
            raise ResultsRejected(f"{where}: is bound to a different request than input line {index + 1}")
        try:
            leaf = result_leaf(task_id, inputs[index], line)
        except (ValueError, KeyError, TypeError) as exc:
            raise ResultsRejected(f"{where}: malformed ({exc})") from exc
        usage = ((line.get("response") or {}).get("body") or {}).get("usage")
        if usage and (usage.get("prompt_tokens"), usage.get("completion_tokens")) != (
            leaf.input_tokens,
            leaf.output_tokens,
        ):
            raise ResultsRejected(f"{where}: its usage differs from the committed token counts")
        if not verify(proof, root, leaf.hash()):
            raise ResultsRejected(f"{where}: not part of the results committed on-chain (tampered?)")
        verified.append(VerifiedLine(line, leaf, proof))
    return verified
