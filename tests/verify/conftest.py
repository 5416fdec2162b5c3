"""A tiny random checkpoint with a tokenizer (so it has a stop token), another one of the same shape, the
float32 reference re-scorer, and honest greedy and sampled outputs from our engine."""

from __future__ import annotations

from pathlib import Path

import pytest

from client_sdk.protocol.sampling import SamplingParams
from miner.tiny_checkpoint import build_tiny_model
from miner.verify.rescore import Claim, Rescorer
from tests.verify.honest import generate

PROMPTS = [[5, 17, 99, 3, 42, 8, 77], [1, 2], [100, 64, 32, 16, 8, 4, 2, 1, 9, 27, 81, 11, 13], [7] * 20]
MAX_TOKENS = [12, 5, 9, 16]


@pytest.fixture(scope="session")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("verify-model"))


@pytest.fixture(scope="session")
def other_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Same architecture and tokenizer, other weights."""
    return build_tiny_model(tmp_path_factory.mktemp("other-model"), seed=1)


@pytest.fixture(scope="session")
def stop_token(checkpoint: Path) -> int:
    import json

    return int(json.loads((checkpoint / "config.json").read_text())["eos_token_id"])


@pytest.fixture(scope="session")
def rescorer(checkpoint: Path) -> Rescorer:
    return Rescorer.load(checkpoint)


@pytest.fixture(scope="session")
def greedy_claims(checkpoint: Path, stop_token: int) -> list[Claim]:
    params = [SamplingParams(max_tokens=n, stop_token_ids=(stop_token,)) for n in MAX_TOKENS]
    return generate(checkpoint, PROMPTS, params)


@pytest.fixture(scope="session")
def sampled_claims(checkpoint: Path, stop_token: int) -> list[Claim]:
    params = [
        SamplingParams(max_tokens=24, temperature=0.8, top_p=0.9, seed=seed, stop_token_ids=(stop_token,))
        for seed in range(len(PROMPTS))
    ]
    return generate(checkpoint, PROMPTS, params)
