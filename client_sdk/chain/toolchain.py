"""Finds the Foundry binaries and the project root that holds the contracts."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from client_sdk.errors import ChainError


def project_root(start: Path | None = None) -> Path:
    """The nearest directory at or above `start` (default: cwd, then this file) holding foundry.toml."""
    candidates = [start or Path.cwd(), Path(__file__).resolve()]
    for origin in candidates:
        for directory in (origin, *origin.parents):
            if (directory / "foundry.toml").is_file():
                return directory
    raise ChainError("cannot find the contracts project (no foundry.toml above the current directory)")


def foundry_binary(name: str) -> str:
    """Path of `forge`, `anvil` or `cast`: $<NAME>_BIN, then the project's node_modules, then PATH."""
    override = os.environ.get(f"{name.upper()}_BIN")
    if override:
        return override
    try:
        local = project_root() / "node_modules" / ".bin" / name
        if local.exists():
            return str(local)
    except ChainError:
        pass
    found = shutil.which(name)
    if found:
        return found
    raise ChainError(f"cannot find `{name}`: run `make bootstrap` or set {name.upper()}_BIN")
