"""The SDK names a task's model by the coordinator's hash of what it serves, but never blindly: a hash the
caller pinned, or the known hash of a model it names, must match, or no task is created (no money moves)."""

from __future__ import annotations

import pytest

from client_sdk.client import task_model_id
from client_sdk.errors import UserError
from client_sdk.protocol.model_identity import KNOWN_MODELS

SMOLLM2 = "HuggingFaceTB/SmolLM2-135M-Instruct"
KNOWN = KNOWN_MODELS[SMOLLM2]
OTHER = "0x" + "cd" * 32


def test_the_served_hash_is_taken_when_it_matches_what_is_known_or_pinned() -> None:
    assert task_model_id(SMOLLM2, KNOWN, None) == bytes.fromhex(KNOWN[2:])
    assert task_model_id("my/finetune", OTHER, None) == bytes.fromhex(OTHER[2:])  # unknown name: served hash
    assert task_model_id("my/finetune", OTHER, OTHER) == bytes.fromhex(OTHER[2:])


@pytest.mark.parametrize(
    ("name", "served", "pinned", "reason"),
    [
        (
            SMOLLM2,
            OTHER,
            None,
            f"serves other weights as '{SMOLLM2}' ({OTHER}) than expected ({SMOLLM2} ({KNOWN}))",
        ),
        ("my/finetune", OTHER, KNOWN, f"than expected ({SMOLLM2} ({KNOWN})); no task was created"),
        ("my/finetune", None, None, "the coordinator gave no model hash for 'my/finetune'"),
        ("my/finetune", "0x12", None, "a model hash must be 32 bytes in hex"),
        ("my/finetune", OTHER, "zz", "a model hash must be 32 bytes in hex"),
    ],
)
def test_a_mismatch_or_a_malformed_hash_creates_no_task(
    name: str, served: str | None, pinned: str | None, reason: str
) -> None:
    with pytest.raises(UserError) as refused:
        task_model_id(name, served, pinned)
    assert reason in str(refused.value)
