"""Values every party must agree on."""

from __future__ import annotations

# Largest sampling seed a request may carry: it travels as a signed 64-bit integer between stages.
MAX_SEED = 2**63 - 1

# Batch statuses (OpenAI's): a batch in a final status changes no more.
ACTIVE_BATCH_STATUSES = ("validating", "in_progress", "finalizing", "cancelling")
FINAL_BATCH_STATUSES = ("completed", "failed", "expired", "cancelled")
