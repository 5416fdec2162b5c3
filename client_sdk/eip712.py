"""EIP-712 typed data: miners' acceptances of tasks and result commitments.

A miner signs an acceptance before any of its stake is locked for a task: `AcceptTask(taskId, miner,
stakeLock, expiry)`. Every assigned miner signs a commitment before a results root goes on-chain: the task's
whole commitment, every miner's served root included (the root of the leaves that miner served, zero if
none), with the task's request count, its assigned miners in order and the miner's own address, so a signer
vouches for exactly what it checked and for no other miner. The digests match TaskRegistry.acceptanceDigest
and TaskRegistry.commitmentDigest byte for byte; the domain binds them to one chain and one contract.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from eth_account import Account
from eth_account.messages import SignableMessage, encode_typed_data
from eth_account.signers.local import LocalAccount
from eth_utils.crypto import keccak

from client_sdk.protocol.constants import MAX_MINERS_PER_TASK
from client_sdk.protocol.fields import addresses, field, uint, word, words
from client_sdk.protocol.structs import to_abi

DOMAIN_NAME = "BatchMarket TaskRegistry"
DOMAIN_VERSION = "1"

RESULT_COMMITMENT_TYPES: dict[str, list[dict[str, str]]] = {
    "ResultCommitment": [
        {"name": "taskId", "type": "uint256"},
        {"name": "requestCount", "type": "uint32"},
        {"name": "miners", "type": "address[]"},
        {"name": "miner", "type": "address"},
        {"name": "resultsRoot", "type": "bytes32"},
        {"name": "inputTokens", "type": "uint64"},
        {"name": "outputTokens", "type": "uint64"},
        {"name": "payment", "type": "uint128"},
        {"name": "minerAmounts", "type": "uint256[]"},
        {"name": "servedRoots", "type": "bytes32[]"},
    ]
}


@dataclass(frozen=True)
class ResultCommitment:
    """A task's results root, usage, payment split and served roots (one amount and one served root per
    assigned miner, in assignment order), with the task's assigned miners and request count that every
    signature covers (the contract reads those two from the task, so they are not part of the commit call)."""

    task_id: int
    results_root: bytes
    input_tokens: int
    output_tokens: int
    payment: int
    miner_amounts: tuple[int, ...]
    served_roots: tuple[bytes, ...]
    miners: tuple[str, ...]
    request_count: int

    @classmethod
    def from_json(cls, task_id: int, c: Mapping[str, Any]) -> ResultCommitment:
        """The commitment as the coordinator publishes it (hex words and integers), checked against the
        contract's types: ValueError naming the field when one is missing, of the wrong type or out of
        range, or when amounts and served roots are not one each for at most MAX_MINERS_PER_TASK miners."""
        what = "the commitment"
        amounts, roots = field(c, "miner_amounts", list, what), field(c, "served_roots", list, what)
        miners = addresses(field(c, "miners", list, what), "miners", what, MAX_MINERS_PER_TASK)
        if not len(amounts) == len(roots) == len(miners) or not 0 < len(amounts) <= MAX_MINERS_PER_TASK:
            raise ValueError(
                f"the commitment's miners, miner_amounts and served_roots must hold one entry per assigned "
                f"miner (1 to {MAX_MINERS_PER_TASK}), not {len(miners)}, {len(amounts)} and {len(roots)}"
            )
        return cls(
            task_id=task_id,
            results_root=word(field(c, "results_root", str, what), "results_root", what),
            input_tokens=uint(field(c, "input_tokens", int, what), 64, "input_tokens", what),
            output_tokens=uint(field(c, "output_tokens", int, what), 64, "output_tokens", what),
            payment=uint(field(c, "payment", int, what), 128, "payment", what),
            miner_amounts=tuple(uint(a, 256, f"miner_amounts[{i}]", what) for i, a in enumerate(amounts)),
            served_roots=words(roots, "served_roots", what, MAX_MINERS_PER_TASK),
            miners=miners,
            request_count=uint(field(c, "request_count", int, what), 32, "request_count", what),
        )

    def needs_signature(self, index: int) -> bool:
        """Whether assigned miner `index` must sign: unless it is paid nothing and vouches for no line (a
        spare that served nothing, or a miner gone for good whose lines others served again), which the
        contract lets the coordinator commit for with an empty signature."""
        return self.miner_amounts[index] != 0 or any(self.served_roots[index])

    def to_json(self) -> dict[str, Any]:
        """The inverse of `from_json` (without the task id, which travels beside it)."""
        return {
            "results_root": "0x" + self.results_root.hex(),
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "payment": self.payment,
            "miner_amounts": list(self.miner_amounts),
            "served_roots": ["0x" + root.hex() for root in self.served_roots],
            "miners": list(self.miners),
            "request_count": self.request_count,
        }

    def message(self, miner: str) -> dict[str, Any]:
        """What assigned miner `miner` signs."""
        return {
            "taskId": self.task_id,
            "requestCount": self.request_count,
            "miners": list(self.miners),
            "miner": miner,
            "resultsRoot": self.results_root,
            "inputTokens": self.input_tokens,
            "outputTokens": self.output_tokens,
            "payment": self.payment,
            "minerAmounts": list(self.miner_amounts),
            "servedRoots": list(self.served_roots),
        }

    def as_tuple(self) -> tuple[Any, ...]:
        """The ITaskRegistry.Commitment struct: every field but the task id, which travels beside it, and the
        miners and request count, which the contract reads from the task."""
        return to_abi(self)[1:-2]


def domain(chain_id: int, task_registry: str) -> dict[str, Any]:
    return {
        "name": DOMAIN_NAME,
        "version": DOMAIN_VERSION,
        "chainId": chain_id,
        "verifyingContract": task_registry,
    }


def signable(commitment: ResultCommitment, miner: str, chain_id: int, task_registry: str) -> SignableMessage:
    return encode_typed_data(
        domain_data=domain(chain_id, task_registry),
        message_types=RESULT_COMMITMENT_TYPES,
        message_data=commitment.message(miner),
    )


def digest(commitment: ResultCommitment, miner: str, chain_id: int, task_registry: str) -> bytes:
    """The 32-byte EIP-712 digest assigned miner `miner` signs (TaskRegistry.commitmentDigest)."""
    return _digest_of(signable(commitment, miner, chain_id, task_registry))


def _digest_of(message: SignableMessage) -> bytes:
    """keccak256(0x1901 || domainSeparator || structHash): what an EIP-712 signature signs."""
    return bytes(keccak(b"\x19" + message.version + message.header + message.body))


def sign_commitment(
    account: LocalAccount, commitment: ResultCommitment, miner: str, chain_id: int, task_registry: str
) -> bytes:
    """A 65-byte signature (r, s, v) over the commitment by the signer of assigned miner `miner`."""
    signed = account.sign_message(signable(commitment, miner, chain_id, task_registry))
    return bytes(signed.signature)


def recover_signer(
    signature: bytes, commitment: ResultCommitment, miner: str, chain_id: int, task_registry: str
) -> str:
    """The address that produced `signature` over this commitment for assigned miner `miner`."""
    recovered: str = Account.recover_message(
        signable(commitment, miner, chain_id, task_registry), signature=signature
    )
    return recovered


ACCEPT_TASK_TYPES: dict[str, list[dict[str, str]]] = {
    "AcceptTask": [
        {"name": "taskId", "type": "uint256"},
        {"name": "miner", "type": "address"},
        {"name": "stakeLock", "type": "uint128"},
        {"name": "expiry", "type": "uint64"},
    ]
}


@dataclass(frozen=True)
class Acceptance:
    """A miner's consent to one task's stake lock: its registered signer's signature over
    `AcceptTask(taskId, miner, stakeLock, expiry)`, usable on-chain until `expiry` (ITaskRegistry.Acceptance).
    It names the miner, so it never counts for another miner that points its signer at the same key."""

    expiry: int
    signature: bytes


def _acceptance(
    task_id: int, miner: str, stake_lock: int, expiry: int, chain_id: int, task_registry: str
) -> SignableMessage:
    return encode_typed_data(
        domain_data=domain(chain_id, task_registry),
        message_types=ACCEPT_TASK_TYPES,
        message_data={"taskId": task_id, "miner": miner, "stakeLock": stake_lock, "expiry": expiry},
    )


def acceptance_digest(
    task_id: int, miner: str, stake_lock: int, expiry: int, chain_id: int, task_registry: str
) -> bytes:
    """`miner`'s acceptance's 32-byte EIP-712 digest (TaskRegistry.acceptanceDigest)."""
    return _digest_of(_acceptance(task_id, miner, stake_lock, expiry, chain_id, task_registry))


def sign_acceptance(
    account: LocalAccount,
    task_id: int,
    miner: str,
    stake_lock: int,
    expiry: int,
    chain_id: int,
    task_registry: str,
) -> Acceptance:
    """`miner`'s consent, signed by `account` (its registered signer), to have `stake_lock` of its stake
    locked for task `task_id`."""
    signed = account.sign_message(_acceptance(task_id, miner, stake_lock, expiry, chain_id, task_registry))
    return Acceptance(expiry, bytes(signed.signature))


def acceptance_signer(
    acceptance: Acceptance, task_id: int, miner: str, stake_lock: int, chain_id: int, task_registry: str
) -> str:
    """The address that signed `acceptance` for `miner`, this task and lock."""
    message = _acceptance(task_id, miner, stake_lock, acceptance.expiry, chain_id, task_registry)
    recovered: str = Account.recover_message(message, signature=acceptance.signature)
    return recovered
