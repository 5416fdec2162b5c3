"""A result line of `miner serve`'s executor turns back into the claim it makes, and that claim passes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from client_sdk import openai_batch
from miner.model.config import ModelConfig
from miner.node.executor import WholeModelExecutor
from miner.pipeline.batch import load_tokenizer, stop_token_ids
from miner.verify.claims import claim_for
from miner.verify.policy import verify
from miner.verify.rescore import Rescorer


def test_result_line_round_trips_to_a_passing_claim(checkpoint: Path, rescorer: Rescorer) -> None:
    body = {"model": "tiny", "prompt": "The quick brown fox", "max_tokens": 10, "temperature": 0.8}
    raw = json.dumps({"custom_id": "a", "method": "POST", "url": "/v1/completions", "body": body})
    [(_, produced)] = WholeModelExecutor(checkpoint).run([{"line": raw, "index": 0}])
    request = openai_batch.parse_line(raw, 1)
    result = openai_batch.output_line(
        "id",
        "a",
        "req",
        openai_batch.response_body(
            request,
            request_id="cmpl-a",
            created=0,
            text=produced.text,
            prompt_tokens=len(produced.prompt),
            completion_tokens=len(produced.output),
            finish_reason=produced.finish_reason,
            token_ids=produced.output,
        ),
    )
    tokenizer = load_tokenizer(checkpoint)
    stops = stop_token_ids(tokenizer, checkpoint)
    claim = claim_for(request, result, tokenizer, ModelConfig.load(checkpoint), stops)
    assert (claim.prompt, claim.output) == (produced.prompt, produced.output)
    assert claim.params.temperature == 0.8 and claim.params.seed != 0  # derived from the custom_id
    [scores] = rescorer.score([claim])
    assert verify(claim.output, claim.params, scores).passed

    with pytest.raises(ValueError, match="not 'b'"):
        claim_for(
            openai_batch.parse_line(raw.replace('"a"', '"b"'), 1),
            result,
            tokenizer,
            ModelConfig.load(checkpoint),
            stops,
        )
    del result["response"]["body"]["choices"][0]["token_ids"]
    with pytest.raises(ValueError, match="no output token ids"):
        claim_for(request, result, tokenizer, ModelConfig.load(checkpoint), stops)
