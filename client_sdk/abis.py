"""Contract ABIs shipped inside the package, so a pip-installed SDK needs no Solidity toolchain.

`python -m client_sdk.abis OUT_DIR` refreshes them from a forge build; a test fails when they drift.
"""

from __future__ import annotations

import json
import sys
from importlib import resources
from pathlib import Path
from typing import Any

CONTRACT_NAMES = (
    "MockStablecoin",
    "GPURegistry",
    "PaymentEscrow",
    "TaskRegistry",
    "VerifierRegistry",
    "Arbitration",
    "Audits",
    "BlockRandomness",
    "LineChallenges",
    "TimelockController",
)

Abi = list[dict[str, Any]]


def load_abi(name: str) -> Abi:
    """The packaged ABI of contract `name`."""
    text = resources.files("client_sdk").joinpath("abi", f"{name}.json").read_text()
    abi: Abi = json.loads(text)
    return abi


def abi_from_forge(out_dir: Path, name: str) -> Abi:
    """The ABI of contract `name` as forge last built it into `out_dir`."""
    artifact = json.loads((out_dir / f"{name}.sol" / f"{name}.json").read_text())
    abi: Abi = artifact["abi"]
    return abi


def export_abis(out_dir: Path, dest_dir: Path) -> list[Path]:
    """Writes every contract's ABI from the forge build into `dest_dir`; returns the files written."""
    dest_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name in CONTRACT_NAMES:
        path = dest_dir / f"{name}.json"
        path.write_text(json.dumps(abi_from_forge(out_dir, name), indent=1, sort_keys=True) + "\n")
        written.append(path)
    return written


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "out")
    for written_path in export_abis(out, Path(__file__).parent / "abi"):
        print(written_path)
