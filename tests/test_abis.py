"""The ABIs shipped in the package must be exactly what forge builds from contracts/src."""

import json
from pathlib import Path
from typing import Any

import pytest

from client_sdk.abis import CONTRACT_NAMES, abi_from_forge, load_abi


def canonical(abi: list[dict[str, Any]]) -> list[str]:
    return sorted(json.dumps(item, sort_keys=True) for item in abi)


@pytest.mark.parametrize("name", CONTRACT_NAMES)
def test_packaged_abi_matches_forge_build(forge_out: Path, name: str) -> None:
    assert canonical(load_abi(name)) == canonical(abi_from_forge(forge_out, name)), (
        f"{name} ABI drifted from the contracts: run `make abi`"
    )
