"""Before signing a batch's result commitment, a miner checks every line it helped produce: the request must
tokenize to the prompt it was fed, the result line must be exactly what its own record of the output
makes, and the line's leaf must be at its position in the committed root. It also checks the committed
usage: every proof in the results sum tree yields the tokens the whole tree adds up to, so its own lines'
proofs and the usage witness (one leaf the coordinator sends everyone) must yield exactly the committed
counts; every signer is slashed if anyone refutes them. And it checks its share: the miners' part must be
split by the work weights the coordinator sends, which must add up to the task's tokens times the model's
layers, and its own weight must be the work its journal records. And it checks the whole tree, from every
leaf the coordinator sends: it has exactly one leaf per request and adds up to the committed root and
usage, each miner's served root is the root of the leaves naming it (or zero for a miner left out), and
every line that bills tokens names a miner whose served root holds it, so any line the owner challenges
can be answered and disputed (a signer answers for the whole tree). Only then does it sign the commitment,
which carries its served root: the root of the tree over exactly its lines' leaves, the only ones it can
be disputed over (a miner that served no line of the batch has the zero root)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from eth_account.signers.local import LocalAccount

from client_sdk import openai_batch
from client_sdk.eip712 import ResultCommitment, sign_commitment
from client_sdk.errors import UserError
from client_sdk.inputs import canonical_json, custom_id_hash, line_hash
from client_sdk.merkle import Usage, root_at
from client_sdk.protocol.settlement import split
from client_sdk.protocol.signing import SigningLine, SigningRequest
from client_sdk.results import ZERO_ROOT, ResultLeaf, ResultTrees, output_hash, served_tree
from miner.node.journal import Served
from miner.node.requests import Reader


@dataclass(frozen=True)
class Signed:
    """A signature over a checked commitment, with the whole results tree it vouches for (kept to answer the
    owner's challenges of its lines)."""

    signature: bytes
    commitment: ResultCommitment
    trees: ResultTrees


class RefusedToSign(Exception):
    """A line we served does not match what the coordinator wants signed."""


class Unrecorded(RefusedToSign):
    """Lines the coordinator credits to us that our journal does not hold (a line can leave this node before
    it is journaled, and a crash in between loses the record): we cannot vouch for them, and say which, so
    that they are served again."""

    def __init__(self, task_id: int, lines: list[int]) -> None:
        shown = ", ".join(map(str, lines[:8])) + (" ..." if len(lines) > 8 else "")
        super().__init__(f"task {task_id}: we have no record of serving {len(lines)} line(s): {shown}")
        self.lines = lines


def check_line(
    task_id: int,
    item: SigningLine,
    mine: Served,
    reader: Reader,
    address: str,
    committed: tuple[bytes, Usage],
    count: int,
) -> ResultLeaf:
    """The line's leaf; raises RefusedToSign unless the item is the line we served, and its leaf is at its
    position of a results tree of `count` leaves whose root and usage are `committed`."""
    index = item.index
    where = f"task {task_id} line {index}"
    try:
        request = openai_batch.parse_line(item.request, index + 1)
        prepared = reader.prepare([request], task_id)
    except UserError as exc:
        raise RefusedToSign(f"{where}: the request cannot be served here ({exc})") from None
    if not prepared or tuple(prepared[0].prompt) != mine.prompt:
        raise RefusedToSign(f"{where}: the prompt we were fed is not this request's")
    line = item.line
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
        pipeline=item.pipeline,
    )
    if address not in leaf.pipeline:
        raise RefusedToSign(f"{where}: its leaf does not name us")
    check_proof(task_id, leaf, item.proof, committed, count)
    return leaf


def check_proof(
    task_id: int, leaf: ResultLeaf, proof: Sequence[bytes], committed: tuple[bytes, Usage], count: int
) -> None:
    """Raises RefusedToSign unless `leaf` is at its position of the committed results sum tree and its proof
    yields the committed usage."""
    where = f"task {task_id} line {leaf.request_index}"
    found = root_at(proof, leaf.hash(), leaf.usage, leaf.request_index, count)
    if found is None or found[0] != committed[0]:
        raise RefusedToSign(f"{where}: its leaf is not at its position in the committed root")
    if found[1] != committed[1]:
        usage = found[1]
        raise RefusedToSign(
            f"task {task_id}: the results add up to {usage.input_tokens} input and {usage.output_tokens} "
            f"output tokens, not the {committed[1].input_tokens} and {committed[1].output_tokens} committed"
        )


def check_and_sign(
    signer: LocalAccount,
    miner: str,
    raw: dict[str, Any],
    served: Mapping[tuple[int, int], Served],
    reader: Reader,
    chain_id: int,
    task_registry: str,
) -> Signed:
    """The EIP-712 signature over the whole commitment, after every line we served checks out, the whole tree
    checks out (`check_tree`) and the commitment carries our served root; signed by `signer` for the miner of
    account address `miner`. `raw` is the coordinator's signing request, as JSON."""
    try:
        request = SigningRequest.from_json(raw)
    except ValueError as exc:
        raise RefusedToSign(f"batch {raw.get('batch_id')!r:.60}: {exc}") from None
    task_id, count, commitment = request.task_id, request.request_count, request.commitment
    committed = (commitment.results_root, Usage(commitment.input_tokens, commitment.output_tokens))
    check_proof(task_id, request.witness, request.witness_proof, committed, count)
    trees = check_tree(request)
    unrecorded = [item.index for item in request.lines if (task_id, item.index) not in served]
    if unrecorded:
        raise Unrecorded(task_id, unrecorded)
    hashes: dict[int, bytes] = {}
    for item in request.lines:
        mine = served[(task_id, item.index)]
        leaf = check_line(task_id, item, mine, reader, miner, committed, count)
        hashes[leaf.request_index] = leaf.hash()
    check_share(request, miner, _work(request, served), reader.config.num_layers)
    tree = served_tree(hashes)
    served_root = tree.root if tree is not None else ZERO_ROOT
    # the signature covers every miner's served root: ours must be the root of exactly what we served
    slots = [i for i, m in enumerate(request.miners) if m.lower() == miner.lower()]
    if len(slots) != 1 or commitment.served_roots[slots[0]] != served_root:
        raise RefusedToSign(f"task {task_id}: the commitment does not carry the root of the lines we served")
    return Signed(sign_commitment(signer, commitment, miner, chain_id, task_registry), commitment, trees)


def check_tree(request: SigningRequest) -> ResultTrees:
    """The results trees of every leaf of the request; raises RefusedToSign unless they are one leaf per
    request adding up to the committed root and usage, each miner's served root in the commitment is the
    root of the leaves naming it or zero (a miner left out, paid nothing), and every line that bills tokens
    names a miner whose committed served root holds it."""
    commitment, task_id = request.commitment, request.task_id
    # the signature covers the commitment's miners and request count, which the contract reads from the task
    if request.miners != commitment.miners or request.request_count != commitment.request_count:
        raise RefusedToSign(f"task {task_id}: the commitment is for other miners or another request count")
    if len(request.leaves) != request.request_count:
        raise RefusedToSign(
            f"task {task_id}: {len(request.leaves)} leaves for {request.request_count} requests"
        )
    try:
        trees = ResultTrees(request.leaves, request.miners)
    except ValueError as exc:
        raise RefusedToSign(f"task {task_id}: {exc}") from None
    if trees.root != commitment.results_root:
        raise RefusedToSign(f"task {task_id}: the leaves do not make the committed results root")
    if trees.usage != Usage(commitment.input_tokens, commitment.output_tokens):
        raise RefusedToSign(f"task {task_id}: the leaves do not add up to the committed usage")
    vouching = set()
    for miner, root in zip(request.miners, commitment.served_roots, strict=True):
        if root == ZERO_ROOT:
            continue
        if root != trees.served_root(miner):
            raise RefusedToSign(f"task {task_id}: miner {miner}'s served root is not the root of its lines")
        vouching.add(miner)
    for leaf in trees.leaves:
        if leaf.usage != Usage(0, 0) and not vouching.intersection(leaf.pipeline):
            raise RefusedToSign(
                f"task {task_id} line {leaf.request_index}: it bills tokens no signing miner answers for"
            )
    return trees


def _work(request: SigningRequest, served: Mapping[tuple[int, int], Served]) -> int | None:
    """Our work on the lines the request credits to us: their tokens times the layers we journaled for each;
    None if our journal lacks the layers of one of them (written before it recorded them)."""
    work = 0
    for item in request.lines:
        mine = served[(request.task_id, item.index)]
        if mine.layers == 0:
            return None
        work += (len(mine.prompt) + len(mine.output)) * mine.layers
    return work


def check_share(request: SigningRequest, address: str, work: int | None, num_layers: int) -> None:
    """Raises RefusedToSign unless the miners' part is split exactly by the work weights the coordinator
    sent, the weights add up to the task's tokens times the model's layers (every line runs through all of
    them), and ours is the work we did (`work`; not checked when None). With every honest miner checking its
    own weight and the total fixed, colluders can only move shares among themselves."""
    commitment = request.commitment
    task_id = commitment.task_id
    miners = [m.lower() for m in request.miners]
    weights = list(request.weights)
    if len(miners) != len(commitment.miner_amounts):
        raise RefusedToSign(f"task {task_id}: one work weight and one amount per assigned miner expected")
    if address.lower() not in miners:
        raise RefusedToSign(f"task {task_id}: we are not among its assigned miners")
    tokens = commitment.input_tokens + commitment.output_tokens
    if sum(weights) != tokens * num_layers:
        raise RefusedToSign(
            f"task {task_id}: the work weights add up to {sum(weights)}, not its {tokens} tokens times "
            f"{num_layers} layers"
        )
    ours = weights[miners.index(address.lower())]
    if work is not None and ours != work:
        raise RefusedToSign(f"task {task_id}: we are credited {ours} units of work, but did {work}")
    amounts = list(commitment.miner_amounts)
    if amounts != split(sum(amounts), weights):
        raise RefusedToSign(f"task {task_id}: the miners' amounts are not their part split by work")
