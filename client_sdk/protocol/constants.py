"""Values every party must agree on."""

from __future__ import annotations

from client_sdk.errors import UserError

# Largest sampling seed a request may carry: it travels as a signed 64-bit integer between stages.
MAX_SEED = 2**63 - 1

# Batch statuses (OpenAI's): a batch in a final status changes no more.
ACTIVE_BATCH_STATUSES = ("validating", "in_progress", "finalizing", "cancelling")
FINAL_BATCH_STATUSES = ("completed", "failed", "expired", "cancelled")
# Final statuses whose task may still hold a commitment to finalize on-chain after the challenge window.
SETTLING_BATCH_STATUSES = ("completed", "cancelled")

# Miners one task may be assigned (TaskRegistry.MAX_MINERS_PER_TASK).
MAX_MINERS_PER_TASK = 32

# Lines in one batch input file at most (OpenAI's limit).
MAX_BATCH_LINES = 50_000

# The dtypes a pipeline stage may run in and send its activations in, by the names command lines, stage
# assignments and frames use.
STAGE_DTYPES = ("float32", "float16", "bfloat16")


def stage_dtype(name: str) -> str:
    """`name` if it is one of STAGE_DTYPES; a UserError naming them otherwise."""
    if name not in STAGE_DTYPES:
        raise UserError(f"dtype must be one of {', '.join(STAGE_DTYPES)}, not {name!r}")
    return name
