"""How human-readable identifiers become the bytes32 values stored on-chain."""

from __future__ import annotations

from client_sdk.errors import UserError


def hex_bytes(text: str) -> bytes:
    """Bytes from their hex form, with or without a 0x prefix (how hashes, proofs and signatures travel in
    JSON); ValueError when `text` is not hex."""
    return bytes.fromhex(str(text).removeprefix("0x"))


def short_string(text: str) -> bytes:
    """A label of at most 32 UTF-8 bytes (GPU class, region), right-padded with zeros; readable back."""
    raw = text.encode()
    if not raw or len(raw) > 32:
        raise UserError(f"{text!r} must be 1 to 32 bytes long")
    return raw.ljust(32, b"\0")


def read_short_string(value: bytes) -> str:
    """The inverse of `short_string`."""
    return bytes(value).rstrip(b"\0").decode(errors="replace")
