"""Object ids in OpenAI's style: a prefix and 24 random hex digits (unguessable, yet never relied on as
secrets: every read checks the owner)."""

from __future__ import annotations

import secrets


def new_id(prefix: str) -> str:
    return f"{prefix}{secrets.token_hex(12)}"
