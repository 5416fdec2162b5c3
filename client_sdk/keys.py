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
# a miner node's signer, when it is another key than the miner's account (`miner serve --signer-keystore`)
SIGNER_KEY_ENV = "BATCHMARKET_SIGNER_PRIVATE_KEY"
SIGNER_KEYSTORE_PASSWORD_ENV = "BATCHMARKET_SIGNER_KEYSTORE_PASSWORD"


def load_account(
    keystore: Path | None,
    ask_password: Callable[[], str] | None = None,
    key_env: str = PRIVATE_KEY_ENV,
    password_env: str = KEYSTORE_PASSWORD_ENV,
) -> LocalAccount:
    """The account of `keystore` (password from $`password_env` or `ask_password`), else the key in
    $`key_env` (by default the caller's own: $BATCHMARKET_KEYSTORE_PASSWORD, $BATCHMARKET_PRIVATE_KEY)."""
    if keystore is not None:
        return _from_keystore(keystore, ask_password, password_env)
    account = key_from_environment(key_env)
    if account is None:
        raise UserError(f"no key: pass --keystore FILE or set {key_env}")
    return account


def key_from_environment(key_env: str) -> LocalAccount | None:
    """The key in $`key_env`, None where it is not set."""
    raw = os.environ.get(key_env)
    if not raw:
        return None
    try:
        account: LocalAccount = Account.from_key(raw.strip())
    except (ValueError, TypeError):
        raise UserError(f"${key_env} is not a valid private key") from None
    return account


def _from_keystore(path: Path, ask_password: Callable[[], str] | None, password_env: str) -> LocalAccount:
    if not path.is_file():
        raise UserError(f"no keystore file at {path}")
    try:
        document = json.loads(path.read_text())
    except ValueError:
        raise UserError(f"{path} is not a keystore file (not JSON)") from None
    password = os.environ.get(password_env)
    if password is None:
        if ask_password is None:
            raise UserError(f"keystore {path} needs a password: set {password_env}")
        password = ask_password()
    try:
        key = Account.decrypt(document, password)
    except ValueError:
        raise UserError(f"cannot decrypt keystore {path}: wrong password or damaged file") from None
    account: LocalAccount = Account.from_key(key)
    return account


def write_keystore(account: LocalAccount, path: Path, password: str) -> None:
    """Encrypts `account` into a standard (v3, scrypt) keystore file readable only by its owner from the
    moment it exists (created so, never a moment under the umask); an existing file is never overwritten
    (FileExistsError)."""
    document = account.encrypt(password)
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as file:
        file.write(json.dumps(document))
