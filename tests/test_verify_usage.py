"""The SDK's check of downloaded lines holds the task's paid usage to what the results sum tree adds up to:
lines whose proofs yield other totals than the ones on-chain raise WrongUsage, which carries a line and proof
that refute the usage on-chain (tests/test_usage_refutation.py runs the refutation itself)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from eth_utils.address import to_checksum_address

from client_sdk.inputs import custom_id_hash, line_hash
from client_sdk.merkle import Usage
from client_sdk.results import PROOF_KEY, LineProof, ResultLeaf, ResultTrees, output_hash
from client_sdk.verify import CommittedResults, ResultsRejected, WrongUsage, check_lines, result_leaf

TASK = 9
MINER = to_checksum_address("0x" + "ab" * 20)


def batch(count: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]], ResultTrees]:
    """Request lines, their result lines (with proofs) and the trees the results were committed in."""
    inputs = [
        {"custom_id": f"req-{i}", "method": "POST", "url": "/v1/completions", "body": {"prompt": f"p{i}"}}
        for i in range(count)
    ]
    lines, leaves = [], []
    for i, request in enumerate(inputs):
        usage = {"prompt_tokens": 10 + i, "completion_tokens": 3 * i + 1}
        line = {"id": f"batch_req_{TASK}_{i}", "custom_id": request["custom_id"], "error": None}
        line["response"] = {"status_code": 200, "request_id": line["id"], "body": {"usage": usage}}
        lines.append(line)
        leaves.append(
            ResultLeaf(
                TASK,
                i,
                custom_id_hash(request["custom_id"]),
                line_hash(request),
                output_hash(line),
                usage["prompt_tokens"],
                usage["completion_tokens"],
                (MINER,),
            )
        )
    trees = ResultTrees(leaves, [MINER])
    for i, line in enumerate(lines):
        line[PROOF_KEY] = LineProof.of(trees, i).to_json()
        assert result_leaf(TASK, line) == leaves[i]
    return inputs, lines, trees


def committed(trees: ResultTrees, usage: Usage) -> CommittedResults:
    served = {MINER.lower(): trees.served_root(MINER)}
    no_input_root = bytes(32)  # check_lines takes the inputs themselves, already checked against it
    return CommittedResults(trees.root, no_input_root, len(trees.leaves), served, usage)


def rows(lines: list[dict[str, Any]]) -> bytes:
    return "\n".join(json.dumps(line) for line in lines).encode()


def test_lines_that_add_up_to_the_paid_usage_are_accepted() -> None:
    inputs, lines, trees = batch(5)
    verified = check_lines(TASK, committed(trees, trees.usage), rows(lines), inputs)
    assert [v.leaf.request_index for v in verified] == list(range(5))
    assert trees.usage == Usage(sum(10 + i for i in range(5)), sum(3 * i + 1 for i in range(5)))


def test_a_paid_usage_the_lines_do_not_add_up_to_is_refutable() -> None:
    inputs, lines, trees = batch(5)
    paid = Usage(trees.usage.input_tokens, trees.usage.output_tokens + 40)
    with pytest.raises(
        WrongUsage, match=r"add up to 60 input and 35 output tokens, but the task is paid for 60 and 75"
    ):
        check_lines(TASK, committed(trees, paid), rows(lines), inputs)
    try:
        check_lines(TASK, committed(trees, paid), rows(lines), inputs)
    except WrongUsage as wrong:
        assert wrong.leaf == trees.leaves[0] and list(wrong.proof) == trees.proof(0)


def test_a_line_whose_counts_were_changed_is_not_in_the_root() -> None:
    inputs, lines, trees = batch(5)
    lines[2][PROOF_KEY]["output_tokens"] += 1
    lines[2]["response"]["body"]["usage"]["completion_tokens"] += 1
    with pytest.raises(ResultsRejected, match=r"result line 3 .*not part of the results committed on-chain"):
        check_lines(TASK, committed(trees, trees.usage), rows(lines), inputs)
