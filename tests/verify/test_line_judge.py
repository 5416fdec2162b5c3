"""The verifier's judge on whole lines, as they arrive in evidence: an honest result line passes, the same
line with one token substituted fails with the rule and position, a leaf whose token counts are not the line's
fails before any re-scoring, an error line is no miner's claim unless its leaf counts tokens, and a line that
cannot be checked (no token ids, a request for another line) fails as unverifiable."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from client_sdk import openai_batch
from client_sdk.inputs import custom_id_hash, line_hash
from client_sdk.openai_batch import error_line
from client_sdk.results import ResultLeaf, output_hash
from miner.node.executor import HeadExecutor
from miner.node.journal import Served
from miner.verify.daemon import LineJudge, describe
from miner.verify.rescore import Rescorer
from tests.miner.nodes import reader_for, stage_hosts

REQUEST = {
    "custom_id": "q-1",
    "method": "POST",
    "url": "/v1/completions",
    "body": {"model": "tiny", "prompt": "The quick brown fox", "max_tokens": 12, "temperature": 0},
}
TASK = 3
PROMPT_TOKENS, OUTPUT_TOKENS = 9, 12  # REQUEST's prompt in the tiny tokenizer; greedy runs to max_tokens


def leaf_of(result_line: dict[str, Any], input_tokens: int, output_tokens: int) -> ResultLeaf:
    """The leaf committed for `result_line` as the answer to REQUEST (line 0 of the task), with these
    counts."""
    return ResultLeaf(
        task_id=TASK,
        request_index=0,
        custom_id_hash=custom_id_hash("q-1"),
        input_hash=line_hash(REQUEST),
        output_hash=output_hash(result_line),
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        pipeline=(),
    )


def serve(checkpoint: Path) -> Served:
    """REQUEST served by our engine on one stage: the prompt it was fed and the output it produced."""
    reader = reader_for(checkpoint)
    with stage_hosts(checkpoint, [(0, 4)]) as [head]:
        assert head.driver is not None
        [(_, served)] = HeadExecutor(reader).run(
            TASK, [{"index": 0, "line": json.dumps(REQUEST)}], head.driver
        )
    return served


def test_lines_are_judged_as_evidence_arrives(checkpoint: Path, rescorer: Rescorer) -> None:
    reader = reader_for(checkpoint)
    served = serve(checkpoint)
    request = openai_batch.parse_line(json.dumps(REQUEST), 1)
    honest = reader.result_line(TASK, 0, request, 0, len(served.prompt), served.output)
    judge = LineJudge(rescorer, checkpoint)
    assert judge.verdict(leaf_of(honest, len(served.prompt), len(served.output)), REQUEST, honest).passed

    swapped = list(served.output)
    swapped[2] = (swapped[2] + 1) % reader.config.vocab_size
    cheat = reader.result_line(TASK, 0, request, 0, len(served.prompt), tuple(swapped))
    verdict = judge.verdict(leaf_of(cheat, len(served.prompt), len(served.output)), REQUEST, cheat)
    assert (verdict.passed, verdict.reason, verdict.position) == (False, "greedy_gap", 2)
    assert describe(verdict).startswith("greedy_gap at output token 2 (logit gap ")

    failed = error_line("id", "q-1", "server_error", "failed")
    assert judge.verdict(leaf_of(failed, 0, 0), REQUEST, failed).reason == "error_line"
    del cheat["response"]["body"]["choices"][0]["token_ids"]
    unverifiable = judge.verdict(leaf_of(cheat, 0, 0), REQUEST, cheat)
    assert not unverifiable.passed and unverifiable.reason.startswith("unverifiable: ")
    other = dict(REQUEST, custom_id="q-2")
    honest_leaf = leaf_of(honest, len(served.prompt), len(served.output))
    assert (
        judge.verdict(honest_leaf, other, honest).reason == "unverifiable: the result is for 'q-1', not 'q-2'"
    )


def test_a_leaf_must_count_the_tokens_of_its_line(checkpoint: Path, rescorer: Rescorer) -> None:
    """Payment is computed from the leaf's counts: a leaf that counts more input tokens than the prompt the
    miner was fed, or more output tokens than the result carries, overcharges and is at fault whatever its
    output, with a reason naming both counts."""
    reader = reader_for(checkpoint)
    served = serve(checkpoint)
    assert (len(served.prompt), len(served.output)) == (PROMPT_TOKENS, OUTPUT_TOKENS)
    request = openai_batch.parse_line(json.dumps(REQUEST), 1)
    line = reader.result_line(TASK, 0, request, 0, len(served.prompt), served.output)
    judge = LineJudge(rescorer, checkpoint)
    honest = leaf_of(line, PROMPT_TOKENS, OUTPUT_TOKENS)

    verdict = judge.verdict(honest, REQUEST, line)
    assert (verdict.passed, verdict.reason) == (True, "ok")

    more_output = judge.verdict(replace(honest, output_tokens=OUTPUT_TOKENS + 88), REQUEST, line)
    reason = f"the leaf counts {OUTPUT_TOKENS + 88} output tokens; the result carries {OUTPUT_TOKENS}"
    assert (more_output.passed, more_output.reason, describe(more_output)) == (False, reason, reason)

    more_input = judge.verdict(replace(honest, input_tokens=PROMPT_TOKENS + 22), REQUEST, line)
    reason = f"the leaf counts {PROMPT_TOKENS + 22} input tokens; the request has {PROMPT_TOKENS}"
    assert (more_input.passed, more_input.reason, describe(more_input)) == (False, reason, reason)

    # an error line served no tokens, so its leaf may count none
    failed = error_line("id", "q-1", "server_error", "failed")
    counted = judge.verdict(leaf_of(failed, PROMPT_TOKENS, 1), REQUEST, failed)
    reason = f"the leaf counts {PROMPT_TOKENS} input and 1 output tokens; an error line served none"
    assert (counted.passed, counted.reason) == (False, reason)
