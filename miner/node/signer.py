"""Before signing a batch's result commitment, a miner checks every line it helped produce: the line must be
exactly what its own outputs make, and its leaf must be in the committed root. Only then does it sign."""

from __future__ import annotations

from typing import Any

from eth_account.signers.local import LocalAccount

from client_sdk import openai_batch
from client_sdk.eip712 import ResultCommitment, sign_commitment
from client_sdk.inputs import canonical_json, custom_id_hash, line_hash
from client_sdk.merkle import verify
from client_sdk.results import ResultLeaf, output_hash, output_line_id
from miner.node.executor import Produced


class RefusedToSign(Exception):
    """A line we served does not match what the coordinator wants signed."""


def expected_line(task_id: int, index: int, created: int, produced: Produced) -> dict[str, Any]:
    request_id = output_line_id(task_id, index)
    body = openai_batch.response_body(
        produced.line,
        request_id=request_id,
        created=created,
        text=produced.text,
        prompt_tokens=len(produced.prompt),
        completion_tokens=len(produced.output),
        finish_reason=produced.finish_reason,
    )
    return openai_batch.output_line(request_id, produced.line.custom_id, request_id, body)


def check_and_sign(
    account: LocalAccount,
    request: dict[str, Any],
    produced: dict[tuple[int, int], Produced],
    created: dict[int, int],
    chain_id: int,
    task_registry: str,
) -> bytes:
    """The EIP-712 signature over the commitment, after every served line checks out."""
    task_id = int(request["task_id"])
    c = request["commitment"]
    commitment = ResultCommitment(
        task_id=task_id,
        results_root=bytes.fromhex(c["results_root"].removeprefix("0x")),
        input_tokens=int(c["input_tokens"]),
        output_tokens=int(c["output_tokens"]),
        payment=int(c["payment"]),
        miner_amounts=tuple(int(a) for a in c["miner_amounts"]),
    )
    for item in request["lines"]:
        index = int(item["index"])
        mine = produced.get((task_id, index))
        if mine is None:
            raise RefusedToSign(f"task {task_id} line {index}: we have no record of serving it")
        line = item["line"]
        if canonical_json(line) != canonical_json(expected_line(task_id, index, created[task_id], mine)):
            raise RefusedToSign(f"task {task_id} line {index}: the result differs from what we produced")
        leaf = ResultLeaf(
            task_id=task_id,
            request_index=index,
            custom_id_hash=custom_id_hash(mine.line.custom_id),
            input_hash=line_hash(mine.line.raw),
            output_hash=output_hash(line),
            input_tokens=len(mine.prompt),
            output_tokens=len(mine.output),
            pipeline=tuple(item["pipeline"]),
        )
        proof = [bytes.fromhex(p.removeprefix("0x")) for p in item["proof"]]
        if account.address not in leaf.pipeline or not verify(proof, commitment.results_root, leaf.hash()):
            raise RefusedToSign(f"task {task_id} line {index}: its leaf is not in the committed root")
    return sign_commitment(account, commitment, chain_id, task_registry)
