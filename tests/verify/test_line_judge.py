"""The verifier's judge on whole lines, as they arrive in evidence: an honest result line passes, the same
line with one token substituted fails with the rule and position, an error line is no miner's claim, and a
line that cannot be checked (no token ids, a request for another line) fails as unverifiable."""

from __future__ import annotations

import json
from pathlib import Path

from client_sdk import openai_batch
from client_sdk.openai_batch import error_line
from miner.node.executor import HeadExecutor
from miner.verify.daemon import LineJudge, describe
from miner.verify.rescore import Rescorer
from tests.miner.nodes import reader_for, stage_hosts

REQUEST = {
    "custom_id": "q-1",
    "method": "POST",
    "url": "/v1/completions",
    "body": {"model": "tiny", "prompt": "The quick brown fox", "max_tokens": 12, "temperature": 0},
}


def test_lines_are_judged_as_evidence_arrives(checkpoint: Path, rescorer: Rescorer) -> None:
    reader = reader_for(checkpoint)
    with stage_hosts(checkpoint, [(0, 4)]) as [head]:
        assert head.driver is not None
        [(_, served)] = HeadExecutor(reader).run(3, [{"index": 0, "line": json.dumps(REQUEST)}], head.driver)
    request = openai_batch.parse_line(json.dumps(REQUEST), 1)
    honest = reader.result_line(3, 0, request, 0, len(served.prompt), served.output)
    judge = LineJudge(rescorer, checkpoint)
    assert judge.verdict(0, REQUEST, honest).passed

    swapped = list(served.output)
    swapped[2] = (swapped[2] + 1) % reader.config.vocab_size
    cheat = reader.result_line(3, 0, request, 0, len(served.prompt), tuple(swapped))
    verdict = judge.verdict(0, REQUEST, cheat)
    assert (verdict.passed, verdict.reason, verdict.position) == (False, "greedy_gap", 2)
    assert describe(verdict).startswith("greedy_gap at output token 2 (logit gap ")

    assert judge.verdict(0, REQUEST, error_line("id", "q-1", "server_error", "failed")).reason == "error_line"
    del cheat["response"]["body"]["choices"][0]["token_ids"]
    unverifiable = judge.verdict(0, REQUEST, cheat)
    assert not unverifiable.passed and unverifiable.reason.startswith("unverifiable: ")
    other = dict(REQUEST, custom_id="q-2")
    assert judge.verdict(0, other, honest).reason == "unverifiable: the result is for 'q-1', not 'q-2'"
