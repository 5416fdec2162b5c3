"""The deployment file: where the contracts live.

Every component reads it instead of hard-coding addresses."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from web3 import Web3

from client_sdk.errors import ChainError

CONTRACT_KEYS = (
    "token",
    "gpu_registry",
    "payment_escrow",
    "task_registry",
    "verifier_registry",
    "arbitration",
    "audits",
    "randomness",
    "line_challenges",
)
ROLE_KEYS = ("admin", "coordinator", "fee_recipient", "timelock")


@dataclass(frozen=True)
class Deployment:
    """Addresses of one deployment of the market, the chain it is on and the block it starts at."""

    chain_id: int
    block: int
    token: str
    gpu_registry: str
    payment_escrow: str
    task_registry: str
    verifier_registry: str
    arbitration: str
    audits: str
    randomness: str  # where jury and audit draws take their seeds
    line_challenges: str
    admin: str
    coordinator: str
    fee_recipient: str
    timelock: str  # holds every protocol contract's admin role; the admin proposes to it

    @classmethod
    def load(cls, path: Path) -> Deployment:
        """Reads a deployment file; a missing or malformed file is a one-line ChainError."""
        if not path.is_file():
            raise ChainError(
                f"no deployment file at {path}: deploy the contracts first (`coordinator deploy`) "
                "or point --deployment / BATCHMARKET_DEPLOYMENT at one"
            )
        try:
            raw = json.loads(path.read_text())
            contracts, roles = raw["contracts"], raw["roles"]
            fields = {key: Web3.to_checksum_address(contracts[key]) for key in CONTRACT_KEYS}
            fields |= {key: Web3.to_checksum_address(roles[key]) for key in ROLE_KEYS}
            return cls(chain_id=int(raw["chain_id"]), block=int(raw["block"]), **fields)
        except (ValueError, KeyError, TypeError) as exc:
            raise ChainError(f"deployment file {path} is malformed: {exc!s}") from None

    def save(self, path: Path) -> None:
        """Writes the file in the same shape the forge deploy script produces."""
        fields = asdict(self)
        document = {
            "chain_id": self.chain_id,
            "block": self.block,
            "contracts": {key: fields[key] for key in CONTRACT_KEYS},
            "roles": {key: fields[key] for key in ROLE_KEYS},
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(document, indent=2) + "\n")
