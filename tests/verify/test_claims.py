"""A result line of `miner serve`'s executor turns back into the claim it makes, and that claim passes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from client_sdk import openai_batch
from client_sdk.protocol.sampling import line_seed
from miner.model.config import ModelConfig
from miner.node.executor import HeadExecutor
from miner.pipeline.batch import load_tokenizer, stop_token_ids
from miner.verify.claims import claim_for
from miner.verify.policy import verify
from miner.verify.rescore import Rescorer
from tests.miner.nodes import reader_for, stage_hosts


def test_result_line_round_trips_to_a_passing_claim(checkpoint: Path, rescorer: Rescorer) -> None:
    body = {"model": "tiny", "prompt": "The quick brown fox", "max_tokens": 10, "temperature": 0.8}
    raw = json.dumps({"custom_id": "a", "method": "POST", "url": "/v1/completions", "body": body})
    reader = reader_for(checkpoint)
    with stage_hosts(checkpoint, [(0, 4)]) as [head]:
        assert head.driver is not None
        [(_, produced)] = HeadExecutor(reader).run(7, [{"line": raw, "index": 0}], head.driver)
    request = openai_batch.parse_line(raw, 1)
    result = reader.result_line(7, 0, request, 0, len(produced.prompt), produced.output)
    tokenizer = load_tokenizer(checkpoint)
    stops = stop_token_ids(tokenizer, checkpoint)
    claim = claim_for(request, result, tokenizer, ModelConfig.load(checkpoint), stops, 7)
    assert (claim.prompt, claim.output) == (produced.prompt, produced.output)
    # derived from the task and the custom_id, and stated in the result
    assert claim.params.temperature == 0.8 and claim.params.seed == line_seed(7, "a", None)
    assert result["response"]["body"]["seed"] == claim.params.seed != line_seed(8, "a", None)
    [scores] = rescorer.score([claim])
    assert verify(claim.output, claim.params, scores).passed
    with pytest.raises(ValueError, match="states seed"):  # another task's line has another seed
        claim_for(request, result, tokenizer, ModelConfig.load(checkpoint), stops, 8)

    with pytest.raises(ValueError, match="not 'b'"):
        claim_for(
            openai_batch.parse_line(raw.replace('"a"', '"b"'), 1),
            result,
            tokenizer,
            ModelConfig.load(checkpoint),
            stops,
            7,
        )
    del result["response"]["body"]["choices"][0]["token_ids"]
    with pytest.raises(ValueError, match="no output token ids"):
        claim_for(request, result, tokenizer, ModelConfig.load(checkpoint), stops, 7)
