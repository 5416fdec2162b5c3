"""The public keys of miners' stage links, as a node announces them when it joins and as assignments carry
them: a 32-byte CURVE key in Z85 (40 characters)."""

from __future__ import annotations

from zmq.utils import z85

KEY_CHARS = 40


def is_link_key(value: str | bytes) -> bool:
    """Whether `value` is a Z85-encoded 32-byte key."""
    raw = value.encode() if isinstance(value, str) else value
    if len(raw) != KEY_CHARS:
        return False
    try:
        return len(z85.decode(raw)) == 32
    except (ValueError, KeyError, UnicodeDecodeError):
        return False
