"""Wallet authentication of HTTP requests to the coordinator (EIP-191 `personal_sign`).

A request carries one header,

    Authorization: Wallet address=0x..., nonce=<hex>, expiry=<unix seconds>, signature=0x...

and the signed text binds the method, the path with its query string, the SHA-256 of the body, the nonce and
the expiry. The server accepts a nonce once and only until its expiry, so a captured header can neither be
replayed nor moved to another request; no password or API key ever exists.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import time
from dataclasses import dataclass

from eth_account import Account
from eth_account.messages import encode_defunct
from eth_account.signers.local import LocalAccount
from eth_utils.address import is_hex_address, to_checksum_address

SCHEME = "Wallet"
DEFAULT_LIFETIME_S = 120
MAX_LIFETIME_S = 600  # the server refuses signatures that stay valid longer than this
_FIELDS = ("address", "nonce", "expiry", "signature")
_FIELD = re.compile(r"\s*(address|nonce|expiry|signature)=([0-9A-Za-z]+)\s*")


class AuthError(Exception):
    """Why a request's signature is not accepted (one line, safe to return to the caller)."""


@dataclass(frozen=True)
class WalletAuth:
    address: str
    nonce: str
    expiry: int
    signature: bytes

    def header(self) -> str:
        return (
            f"{SCHEME} address={self.address}, nonce={self.nonce}, expiry={self.expiry}, "
            f"signature=0x{self.signature.hex()}"
        )


def message(method: str, target: str, body_sha256: str, address: str, nonce: str, expiry: int) -> str:
    """The text a wallet signs for one request (`target` is the path plus `?query` when there is one,
    `body_sha256` the body's SHA-256 in hex: a server can hash a large body as it streams in)."""
    return (
        "batchmarket request\n"
        f"{method.upper()} {target}\n"
        f"body-sha256: {body_sha256}\n"
        f"address: {to_checksum_address(address)}\n"
        f"nonce: {nonce}\n"
        f"expiry: {expiry}"
    )


def sign_request(
    account: LocalAccount,
    method: str,
    target: str,
    body: bytes = b"",
    *,
    now: int | None = None,
    lifetime_s: int = DEFAULT_LIFETIME_S,
) -> str:
    """The Authorization header value for one request."""
    expiry = int(time.time() if now is None else now) + lifetime_s
    nonce = secrets.token_hex(16)
    text = message(method, target, hashlib.sha256(body).hexdigest(), account.address, nonce, expiry)
    signed = account.sign_message(encode_defunct(text=text))
    return WalletAuth(account.address, nonce, expiry, bytes(signed.signature)).header()


def parse_header(value: str) -> WalletAuth:
    scheme, _, rest = value.partition(" ")
    if scheme != SCHEME:
        raise AuthError(f"expected an Authorization header of the form '{SCHEME} address=..., ...'")
    fields: dict[str, str] = {}
    for part in rest.split(","):
        match = _FIELD.fullmatch(part)
        if not match or match.group(1) in fields:
            raise AuthError(f"malformed Authorization field {part.strip()[:40]!r}")
        fields[match.group(1)] = match.group(2)
    missing = [name for name in _FIELDS if name not in fields]
    if missing:
        raise AuthError(f"the Authorization header lacks {', '.join(missing)}")
    if not is_hex_address(fields["address"]):
        raise AuthError("the Authorization address is not an address")
    if not re.fullmatch(r"[0-9a-f]{16,64}", fields["nonce"]):
        raise AuthError("the nonce must be 16 to 64 lowercase hex digits")
    if not fields["expiry"].isdigit() or len(fields["expiry"]) > 12:
        raise AuthError("the expiry must be unix seconds")
    if not re.fullmatch(r"0x[0-9a-fA-F]{130}", fields["signature"]):
        raise AuthError("the signature must be 65 bytes of hex")
    return WalletAuth(
        to_checksum_address(fields["address"]),
        fields["nonce"],
        int(fields["expiry"]),
        bytes.fromhex(fields["signature"][2:]),
    )


def verify(auth: WalletAuth, method: str, target: str, body_sha256: str, now: int) -> str:
    """The signer's checksum address if the signature is valid at `now` for this request, whose body has the
    SHA-256 `body_sha256` (hex); nonce reuse is the caller's to check: it needs shared state."""
    if auth.expiry <= now:
        raise AuthError("the request signature has expired")
    if auth.expiry > now + MAX_LIFETIME_S:
        raise AuthError(f"the request signature must expire within {MAX_LIFETIME_S} s")
    text = message(method, target, body_sha256, auth.address, auth.nonce, auth.expiry)
    try:
        signer = Account.recover_message(encode_defunct(text=text), signature=auth.signature)
    except Exception as exc:  # eth_keys raises several types for malformed signatures
        raise AuthError("the request signature is malformed") from exc
    if signer != auth.address:
        raise AuthError("the request signature does not match the address")
    return str(signer)
