"""EIP-712 result commitments: Python's digest equals the contract's, Python signatures are accepted on-chain,
and tampered or misdirected ones are rejected."""

from __future__ import annotations

from dataclasses import replace

import pytest
from eth_account.signers.local import LocalAccount
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from client_sdk.chain.contracts import Market
from client_sdk.chain.types import TaskStatus
from client_sdk.eip712 import ResultCommitment, digest, recover_signer, sign_commitment
from client_sdk.errors import ContractRevert
from tests.helpers import assigned_task

COMMITMENTS = st.builds(
    ResultCommitment,
    task_id=st.integers(min_value=0, max_value=2**256 - 1),
    results_root=st.binary(min_size=32, max_size=32),
    input_tokens=st.integers(min_value=0, max_value=2**64 - 1),
    output_tokens=st.integers(min_value=0, max_value=2**64 - 1),
    payment=st.integers(min_value=0, max_value=2**128 - 1),
    miner_amounts=st.lists(st.integers(min_value=0, max_value=2**256 - 1), max_size=6).map(tuple),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(commitment=COMMITMENTS)
def test_python_digest_equals_contract_digest(admin_market: Market, commitment: ResultCommitment) -> None:
    chain_id, registry = admin_market.deployment.chain_id, admin_market.deployment.task_registry
    assert digest(commitment, chain_id, registry) == admin_market.tasks.commitment_digest(commitment)


def _commitment(task_id: int) -> ResultCommitment:
    # payment 20 tokens, 5% fee -> 19 tokens to the two miners
    return ResultCommitment(task_id, b"\x11" * 32, 400_000, 600_000, 20_000_000, (11_400_000, 7_600_000))


@pytest.fixture
def task(admin_market: Market, accounts: list[LocalAccount]) -> int:
    return assigned_task(admin_market, accounts[1], accounts[2], [accounts[3], accounts[4]])


def test_python_signatures_are_accepted_on_chain(
    admin_market: Market, accounts: list[LocalAccount], task: int
) -> None:
    chain_id, registry = admin_market.deployment.chain_id, admin_market.deployment.task_registry
    commitment = _commitment(task)
    signatures = [sign_commitment(m, commitment, chain_id, registry) for m in (accounts[3], accounts[4])]
    assert recover_signer(signatures[0], commitment, chain_id, registry) == accounts[3].address

    admin_market.as_account(accounts[1]).tasks.commit_results(commitment, signatures)

    record = admin_market.tasks.get_task(task)
    assert record.status == TaskStatus.RESULTS_COMMITTED
    assert record.results_root == commitment.results_root
    assert (record.payment, record.fee) == (20_000_000, 1_000_000)


@pytest.mark.parametrize(
    "tamper", ["other_payment", "other_root", "wrong_key", "other_chain", "flipped_byte"]
)
def test_tampered_signatures_are_rejected(
    admin_market: Market, accounts: list[LocalAccount], task: int, tamper: str
) -> None:
    chain_id, registry = admin_market.deployment.chain_id, admin_market.deployment.task_registry
    commitment = _commitment(task)
    honest = sign_commitment(accounts[3], commitment, chain_id, registry)
    second = {
        "other_payment": sign_commitment(
            accounts[4], replace(commitment, payment=19_000_000), chain_id, registry
        ),
        "other_root": sign_commitment(
            accounts[4], replace(commitment, results_root=b"\x22" * 32), chain_id, registry
        ),
        "wrong_key": sign_commitment(accounts[5], commitment, chain_id, registry),
        "other_chain": sign_commitment(accounts[4], commitment, chain_id + 1, registry),
        "flipped_byte": _flip(sign_commitment(accounts[4], commitment, chain_id, registry)),
    }[tamper]

    with pytest.raises(ContractRevert) as caught:
        admin_market.as_account(accounts[1]).tasks.commit_results(commitment, [honest, second])
    assert caught.value.error_name == "InvalidSignature"
    assert caught.value.error_args["miner"] == accounts[4].address
    assert admin_market.tasks.get_task(task).status == TaskStatus.ASSIGNED


def _flip(signature: bytes) -> bytes:
    return signature[:10] + bytes([signature[10] ^ 0x01]) + signature[11:]
