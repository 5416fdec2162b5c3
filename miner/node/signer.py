"""Before signing a batch's result commitment, a miner checks every line it helped produce: the request must
tokenize to the prompt it was fed, the result line must be exactly what its own record of the output makes,
and the line's leaf must be at its position in the committed root. Only then does it sign, together with its
served root: the root of the tree over exactly those leaves, the only ones it vouches for (a miner that served
no line of the batch signs the zero root and cannot be disputed over any of them)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from eth_account.signers.local import LocalAccount

from client_sdk import openai_batch
from client_sdk.eip712 import ResultCommitment, sign_commitment
from client_sdk.encoding import hex_bytes
from client_sdk.errors import UserError
from client_sdk.inputs import canonical_json, custom_id_hash, line_hash
from client_sdk.merkle import root_at
from client_sdk.results import ZERO_ROOT, ResultLeaf, output_hash, served_tree
from miner.node.journal import Served
from miner.node.requests import Reader


class RefusedToSign(Exception):
    """A line we served does not match what the coordinator wants signed."""


def check_line(
    task_id: int, item: dict[str, Any], mine: Served, reader: Reader, address: str, root: bytes, count: int
) -> ResultLeaf:
    """The line's leaf; raises RefusedToSign unless the item is the line we served, and its leaf is at its
    position of `root`, a results tree of `count` leaves."""
    index = int(item["index"])
    where = f"task {task_id} line {index}"
    try:
        request = openai_batch.parse_line(item["request"], index + 1)
        prepared = reader.prepare([request])
    except UserError as exc:
        raise RefusedToSign(f"{where}: the request cannot be served here ({exc})") from None
    if not prepared or tuple(prepared[0].prompt) != mine.prompt:
        raise RefusedToSign(f"{where}: the prompt we were fed is not this request's")
    line = item["line"]
    created = int(line["response"]["body"]["created"])
    expected = reader.result_line(task_id, index, request, created, len(mine.prompt), mine.output)
    if canonical_json(line) != canonical_json(expected):
        raise RefusedToSign(f"{where}: the result differs from what we produced")
    leaf = ResultLeaf(
        task_id=task_id,
        request_index=index,
        custom_id_hash=custom_id_hash(request.custom_id),
        input_hash=line_hash(request.raw),
        output_hash=output_hash(line),
        input_tokens=len(mine.prompt),
        output_tokens=len(mine.output),
        pipeline=tuple(item["pipeline"]),
    )
    proof = [hex_bytes(p) for p in item["proof"]]
    if address not in leaf.pipeline or root_at(proof, leaf.hash(), index, count) != root:
        raise RefusedToSign(f"{where}: its leaf is not at its position in the committed root")
    return leaf


def check_and_sign(
    account: LocalAccount,
    request: dict[str, Any],
    served: Mapping[tuple[int, int], Served],
    reader: Reader,
    chain_id: int,
    task_registry: str,
) -> bytes:
    """The EIP-712 signature over the commitment and our served root, after every line we served checks
    out."""
    task_id = int(request["task_id"])
    count = int(request["request_count"])
    commitment = ResultCommitment.from_json(task_id, request["commitment"])
    hashes: dict[int, bytes] = {}
    for item in request["lines"]:
        mine = served.get((task_id, int(item["index"])))
        if mine is None:
            raise RefusedToSign(f"task {task_id} line {item['index']}: we have no record of serving it")
        leaf = check_line(task_id, item, mine, reader, account.address, commitment.results_root, count)
        hashes[leaf.request_index] = leaf.hash()
    tree = served_tree(hashes)
    served_root = tree.root if tree is not None else ZERO_ROOT
    return sign_commitment(account, commitment, served_root, chain_id, task_registry)
