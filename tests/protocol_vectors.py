"""Test vectors of the formats the parties and the contracts share: result leaves and their hashes, the
positional results sum tree and its proofs (yielding the task's usage), the miners' served trees, input
leaves and the EIP-712 digests of a commitment and of a miner's acceptance of a task.

Built here by the Python protocol code and committed as contracts/test/vectors/protocol.json: pytest checks
that Python still builds exactly that file (tests/test_protocol_vectors.py) and forge checks that the
contracts compute the same values from it (contracts/test/ProtocolVectors.t.sol), so neither side can drift
alone. After a deliberate format change, regenerate with `python -m tests.protocol_vectors`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from client_sdk.eip712 import ResultCommitment, acceptance_digest, digest
from client_sdk.inputs import input_leaf
from client_sdk.merkle import keccak256
from client_sdk.results import ResultLeaf, ResultTrees

VECTORS_FILE = Path(__file__).resolve().parent.parent / "contracts" / "test" / "vectors" / "protocol.json"
TASK_ID = 7
CHAIN_ID = 31337
# Where the forge test places a TaskRegistry for the digest (any fixed address works; the digest binds it).
VERIFYING_CONTRACT = "0x000000000000000000000000000000000000bA7C"
MINERS = (
    "0x1111111111111111111111111111111111111111",
    "0x2222222222222222222222222222222222222222",
    "0x3333333333333333333333333333333333333333",  # assigned, served nothing: its served root is zero
)
# Five requests (an odd count, so the last leaf is carried up a level): pipelines of one and two stages, a
# line no miner served (a cancelled batch's line that never ran).
PIPELINES = ((MINERS[0], MINERS[1]), (MINERS[1],), (MINERS[0], MINERS[1]), None, (MINERS[1], MINERS[0]))
# A miner's consent to lock 10 tokens (6 decimals) of its stake for the task, usable until 2030-01-01.
ACCEPTED_LOCK, ACCEPTED_UNTIL = 10_000_000, 1_893_456_000


def _hex(value: bytes) -> str:
    return "0x" + value.hex()


def _word(text: str) -> bytes:
    return keccak256(text.encode())


def leaves() -> list[ResultLeaf]:
    out = []
    for i, pipeline in enumerate(PIPELINES):
        custom_id, line = _word(f"custom-{i}"), _word(f"request line {i}")
        if pipeline is None:
            out.append(ResultLeaf.unserved(TASK_ID, i, custom_id, line))
            continue
        out.append(
            ResultLeaf(TASK_ID, i, custom_id, line, _word(f"output line {i}"), 10 + i, 100 * i + 1, pipeline)
        )
    return out


def build() -> dict[str, Any]:
    """The vectors, as the JSON file holds them."""
    result_leaves = leaves()
    trees = ResultTrees(result_leaves, MINERS)
    commitment = ResultCommitment(
        task_id=TASK_ID,
        results_root=trees.root,
        input_tokens=trees.usage.input_tokens,
        output_tokens=trees.usage.output_tokens,
        payment=1_234_567,
        miner_amounts=(600_000, 572_839, 0),
        served_roots=trees.served_roots(),
        miners=MINERS,
        request_count=len(result_leaves),
    )
    return {
        "taskId": TASK_ID,
        "requestCount": len(result_leaves),
        "miners": list(MINERS),
        "leaves": [
            {
                "requestIndex": leaf.request_index,
                "customIdHash": _hex(leaf.custom_id_hash),
                "inputHash": _hex(leaf.input_hash),
                "outputHash": _hex(leaf.output_hash),
                "inputTokens": leaf.input_tokens,
                "outputTokens": leaf.output_tokens,
                "pipeline": list(leaf.pipeline),
                "hash": _hex(leaf.hash()),
                "proof": [_hex(p) for p in trees.proof(leaf.request_index)],
                "servedProofs": [
                    [_hex(p) for p in proof] for proof in trees.served_proofs(leaf.request_index)
                ],
                "inputLeaf": _hex(
                    input_leaf(leaf.request_index, f"custom-{leaf.request_index}", leaf.input_hash)
                ),
            }
            for leaf in result_leaves
        ],
        "resultsRoot": _hex(trees.root),
        "servedRoots": [_hex(root) for root in trees.served_roots()],
        "commitment": {
            "chainId": CHAIN_ID,
            "verifyingContract": VERIFYING_CONTRACT,
            "inputTokens": commitment.input_tokens,
            "outputTokens": commitment.output_tokens,
            "payment": commitment.payment,
            "minerAmounts": list(commitment.miner_amounts),
            "digests": [_hex(digest(commitment, miner, CHAIN_ID, VERIFYING_CONTRACT)) for miner in MINERS],
        },
        "acceptance": {
            "miner": MINERS[0],
            "stakeLock": ACCEPTED_LOCK,
            "expiry": ACCEPTED_UNTIL,
            "digest": _hex(
                acceptance_digest(
                    TASK_ID, MINERS[0], ACCEPTED_LOCK, ACCEPTED_UNTIL, CHAIN_ID, VERIFYING_CONTRACT
                )
            ),
        },
    }


def render() -> str:
    return json.dumps(build(), indent=2) + "\n"


if __name__ == "__main__":
    VECTORS_FILE.parent.mkdir(parents=True, exist_ok=True)
    VECTORS_FILE.write_text(render())
    print(f"wrote {VECTORS_FILE}")
