"""The claim a result line makes: the request re-derived exactly as the miner prepared it (prompt rendering,
max_tokens default, seed derived from the task and custom_id when absent, stop tokens), and the output token
ids the result carries. The verifier re-scores this; the evidence's hashes bind both lines to the committed
leaf."""

from __future__ import annotations

from typing import Any

from client_sdk.openai_batch import BatchLine
from miner.model.config import ModelConfig
from miner.pipeline.batch import prepare
from miner.verify.rescore import Claim


def claim_for(
    request: BatchLine,
    result: dict[str, Any],
    tokenizer: Any,
    config: ModelConfig,
    stops: tuple[int, ...],
    task_id: int,
) -> Claim:
    """The claim of `result`, a line of task `task_id`. Raises ValueError when the result carries no token
    ids, states another seed than the line's, or the model could not serve the request."""
    if result.get("custom_id") != request.custom_id:
        raise ValueError(f"the result is for {result.get('custom_id')!r}, not {request.custom_id!r}")
    try:
        token_ids = result["response"]["body"]["choices"][0]["token_ids"]
    except (KeyError, IndexError, TypeError):
        raise ValueError("the result line carries no output token ids") from None
    ready, errors = prepare([request], tokenizer, config, stops, task_id)
    if not ready:
        raise ValueError(f"the model cannot serve this request: {errors[0]['error']['message']}")
    stated = result["response"]["body"].get("seed")
    if stated is not None and stated != ready[0].params.seed:
        raise ValueError(f"the result states seed {stated}; the line's is {ready[0].params.seed}")
    return Claim(tuple(ready[0].prompt), tuple(int(t) for t in token_ids), ready[0].params)
