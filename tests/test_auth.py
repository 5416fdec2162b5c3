"""Request signatures: what verifies, and the exact reason for everything that must not."""

from __future__ import annotations

import contextlib
import hashlib

import pytest
from eth_account import Account
from hypothesis import given, settings
from hypothesis import strategies as st

from client_sdk.auth import MAX_LIFETIME_S, AuthError, WalletAuth, parse_header, sign_request, verify

ALICE = Account.from_key("0x" + "11" * 32)
MALLORY = Account.from_key("0x" + "22" * 32)
NOW = 1_800_000_000
EMPTY = hashlib.sha256(b"").hexdigest()


def signed(method: str = "GET", target: str = "/v1/batches", body: bytes = b"") -> WalletAuth:
    return parse_header(sign_request(ALICE, method, target, body, now=NOW))


def test_a_signed_request_verifies_to_its_signer() -> None:
    assert verify(signed(), "GET", "/v1/batches", EMPTY, NOW) == ALICE.address


@pytest.mark.parametrize(
    ("method", "target", "body"),
    [
        ("POST", "/v1/batches", b""),
        ("GET", "/v1/batches?limit=1", b""),
        ("GET", "/v1/batches/other", b""),
        ("GET", "/v1/batches", b"x"),
    ],
)
def test_the_signature_binds_method_target_and_body(method: str, target: str, body: bytes) -> None:
    with pytest.raises(AuthError, match="does not match the address"):
        verify(signed(), method, target, hashlib.sha256(body).hexdigest(), NOW)


def test_expired_and_overlong_signatures_are_refused() -> None:
    auth = signed()
    with pytest.raises(AuthError, match="expired"):
        verify(auth, "GET", "/v1/batches", EMPTY, auth.expiry)
    far = parse_header(sign_request(ALICE, "GET", "/x", now=NOW, lifetime_s=MAX_LIFETIME_S + 1))
    with pytest.raises(AuthError, match=f"within {MAX_LIFETIME_S} s"):
        verify(far, "GET", "/x", EMPTY, NOW)


def test_claiming_another_address_fails() -> None:
    auth = signed()
    forged = WalletAuth(MALLORY.address, auth.nonce, auth.expiry, auth.signature)
    with pytest.raises(AuthError, match="does not match the address"):
        verify(forged, "GET", "/v1/batches", EMPTY, NOW)


@pytest.mark.parametrize(
    ("header", "reason"),
    [
        ("Bearer abc", "expected an Authorization header"),
        ("Wallet address=0x1", "lacks nonce, expiry, signature"),
        ("Wallet address=0x1, nonce=00, expiry=1, signature=0x00", "not an address"),
        (f"Wallet address={ALICE.address}, nonce=xyz, expiry=1, signature=0x00", "nonce must be"),
        (f"Wallet address={ALICE.address}, nonce={'a' * 32}, expiry=soon, signature=0x00", "expiry must be"),
        (f"Wallet address={ALICE.address}, nonce={'a' * 32}, expiry=1, signature=0x00", "65 bytes"),
        (f"Wallet address={ALICE.address}, address={ALICE.address}", "malformed Authorization field"),
        ("Wallet nonce=a b", "malformed Authorization field"),
    ],
)
def test_malformed_headers_are_refused_with_the_reason(header: str, reason: str) -> None:
    with pytest.raises(AuthError, match=reason):
        parse_header(header)


@settings(max_examples=50, deadline=None)
@given(st.text(max_size=200))
def test_any_header_text_parses_or_raises_auth_error(header: str) -> None:
    with contextlib.suppress(AuthError):
        parse_header(header)


def test_a_flipped_signature_byte_never_verifies() -> None:
    auth = signed()
    for index in (0, 31, 63):
        sig = bytearray(auth.signature)
        sig[index] ^= 1
        tampered = WalletAuth(auth.address, auth.nonce, auth.expiry, bytes(sig))
        with pytest.raises(AuthError):
            verify(tampered, "GET", "/v1/batches", EMPTY, NOW)
