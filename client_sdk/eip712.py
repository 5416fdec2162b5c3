"""EIP-712 typed data for result commitments.

Every pipeline miner signs one before a results root goes on-chain. The digest matches
TaskRegistry.commitmentDigest byte for byte; the domain binds it to one chain and one contract.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eth_account import Account
from eth_account.messages import SignableMessage, encode_typed_data
from eth_account.signers.local import LocalAccount
from eth_utils.crypto import keccak

DOMAIN_NAME = "BatchMarket TaskRegistry"
DOMAIN_VERSION = "1"

RESULT_COMMITMENT_TYPES: dict[str, list[dict[str, str]]] = {
    "ResultCommitment": [
        {"name": "taskId", "type": "uint256"},
        {"name": "resultsRoot", "type": "bytes32"},
        {"name": "inputTokens", "type": "uint64"},
        {"name": "outputTokens", "type": "uint64"},
        {"name": "payment", "type": "uint128"},
        {"name": "minerAmounts", "type": "uint256[]"},
    ]
}


@dataclass(frozen=True)
class ResultCommitment:
    """A task's results root, usage and payment split (one amount per assigned miner, in assignment order)."""

    task_id: int
    results_root: bytes
    input_tokens: int
    output_tokens: int
    payment: int
    miner_amounts: tuple[int, ...]

    def message(self) -> dict[str, Any]:
        return {
            "taskId": self.task_id,
            "resultsRoot": self.results_root,
            "inputTokens": self.input_tokens,
            "outputTokens": self.output_tokens,
            "payment": self.payment,
            "minerAmounts": list(self.miner_amounts),
        }

    def as_tuple(self) -> tuple[Any, ...]:
        """The ITaskRegistry.Commitment struct (task id travels separately)."""
        return (
            self.results_root,
            self.input_tokens,
            self.output_tokens,
            self.payment,
            list(self.miner_amounts),
        )


def domain(chain_id: int, task_registry: str) -> dict[str, Any]:
    return {
        "name": DOMAIN_NAME,
        "version": DOMAIN_VERSION,
        "chainId": chain_id,
        "verifyingContract": task_registry,
    }


def signable(commitment: ResultCommitment, chain_id: int, task_registry: str) -> SignableMessage:
    return encode_typed_data(
        domain_data=domain(chain_id, task_registry),
        message_types=RESULT_COMMITMENT_TYPES,
        message_data=commitment.message(),
    )


def digest(commitment: ResultCommitment, chain_id: int, task_registry: str) -> bytes:
    """The 32-byte EIP-712 digest: keccak256(0x1901 || domainSeparator || structHash)."""
    message = signable(commitment, chain_id, task_registry)
    return bytes(keccak(b"\x19" + message.version + message.header + message.body))


def sign_commitment(
    account: LocalAccount, commitment: ResultCommitment, chain_id: int, task_registry: str
) -> bytes:
    """A 65-byte signature (r, s, v) over the commitment."""
    signed = account.sign_message(signable(commitment, chain_id, task_registry))
    return bytes(signed.signature)


def recover_signer(signature: bytes, commitment: ResultCommitment, chain_id: int, task_registry: str) -> str:
    """The address that produced `signature` over this commitment."""
    recovered: str = Account.recover_message(
        signable(commitment, chain_id, task_registry), signature=signature
    )
    return recovered
