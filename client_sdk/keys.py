"""Signing keys come from an encrypted keystore file or an environment variable, never from a command line
(where other users of the machine could read them in the process list)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

from eth_account import Account
from eth_account.signers.local import LocalAccount

from client_sdk.errors import UserError

PRIVATE_KEY_ENV = "BATCHMARKET_PRIVATE_KEY"
KEYSTORE_PASSWORD_ENV = "BATCHMARKET_KEYSTORE_PASSWORD"


def load_account(keystore: Path | None, ask_password: Callable[[], str] | None = None) -> LocalAccount:
    """The account of `keystore` (password from $BATCHMARKET_KEYSTORE_PASSWORD or `ask_password`), else the
    key in $BATCHMARKET_PRIVATE_KEY."""
    if keystore is not None:
        return _from_keystore(keystore, ask_password)
    raw = os.environ.get(PRIVATE_KEY_ENV)
    if raw:
        try:
            account: LocalAccount = Account.from_key(raw.strip())
        except (ValueError, TypeError):
            raise UserError(f"${PRIVATE_KEY_ENV} is not a valid private key") from None
        return account
    raise UserError(f"no key: pass --keystore FILE or set {PRIVATE_KEY_ENV}")


def _from_keystore(path: Path, ask_password: Callable[[], str] | None) -> LocalAccount:
    if not path.is_file():
        raise UserError(f"no keystore file at {path}")
    try:
        document = json.loads(path.read_text())
    except ValueError:
        raise UserError(f"{path} is not a keystore file (not JSON)") from None
    password = os.environ.get(KEYSTORE_PASSWORD_ENV)
    if password is None:
        if ask_password is None:
            raise UserError(f"keystore {path} needs a password: set {KEYSTORE_PASSWORD_ENV}")
        password = ask_password()
    try:
        key = Account.decrypt(document, password)
    except ValueError:
        raise UserError(f"cannot decrypt keystore {path}: wrong password or damaged file") from None
    account: LocalAccount = Account.from_key(key)
    return account


def write_keystore(account: LocalAccount, path: Path, password: str) -> None:
    """Encrypts `account` into a standard (v3, scrypt) keystore file readable only by its owner."""
    document = account.encrypt(password)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document))
    path.chmod(0o600)
