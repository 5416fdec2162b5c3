"""EIP-712 result commitments: Python's digest equals the contract's, Python signatures are accepted on-chain,
and tampered or misdirected ones (another served root included) are rejected; the commitment's JSON form round
trips, and every missing, mistyped or out-of-range field is refused by name."""

from __future__ import annotations

from dataclasses import replace

import pytest
from eth_account import Account
from eth_account.signers.local import LocalAccount
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from web3 import Web3

from client_sdk.chain.contracts import Market
from client_sdk.eip712 import (
    ResultCommitment,
    acceptance_signer,
    digest,
    recover_signer,
    sign_acceptance,
    sign_commitment,
)
from client_sdk.errors import ContractRevert
from client_sdk.protocol.task import TaskStatus
from demo.lifecycle import DemoConfig
from tests.helpers import assigned_task

MINER_COUNTS = st.integers(min_value=1, max_value=6)
ADDRESSES = st.binary(min_size=20, max_size=20).map(Web3.to_checksum_address)
COMMITMENTS = MINER_COUNTS.flatmap(
    lambda miners: st.builds(
        ResultCommitment,
        task_id=st.integers(min_value=0, max_value=2**256 - 1),
        results_root=st.binary(min_size=32, max_size=32),
        input_tokens=st.integers(min_value=0, max_value=2**64 - 1),
        output_tokens=st.integers(min_value=0, max_value=2**64 - 1),
        payment=st.integers(min_value=0, max_value=2**128 - 1),
        miner_amounts=st.lists(
            st.integers(min_value=0, max_value=2**256 - 1), min_size=miners, max_size=miners
        ).map(tuple),
        served_roots=st.lists(st.binary(min_size=32, max_size=32), min_size=miners, max_size=miners).map(
            tuple
        ),
        miners=st.lists(ADDRESSES, min_size=miners, max_size=miners).map(tuple),
        request_count=st.integers(min_value=0, max_value=2**32 - 1),
    )
)
WORDS = st.binary(min_size=32, max_size=32)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(commitment=COMMITMENTS, miner=WORDS.map(lambda w: Web3.to_checksum_address(w[:20])))
def test_python_digest_equals_contract_digest(
    admin_market: Market, commitment: ResultCommitment, miner: str
) -> None:
    """The contract reads the miners and request count from the task: none for a task it does not have (the
    shared vectors cover a stored task's)."""
    chain_id, registry = admin_market.deployment.chain_id, admin_market.deployment.task_registry
    unknown = replace(commitment, task_id=2**255 + commitment.task_id % 2**64, miners=(), request_count=0)
    assert digest(unknown, miner, chain_id, registry) == admin_market.tasks.commitment_digest(unknown, miner)


@given(commitment=COMMITMENTS)
def test_commitment_json_round_trips(commitment: ResultCommitment) -> None:
    assert ResultCommitment.from_json(commitment.task_id, commitment.to_json()) == commitment


# Values each field must refuse: wrong JSON types, out of the contract's range, words of the wrong length.
NOT_A_WORD = st.one_of(
    st.integers(), st.none(), st.just("0x1234"), st.just("0x" + "zz" * 32), st.just("0x" + "11" * 33)
)
BAD_VALUES = {
    "results_root": NOT_A_WORD,
    "input_tokens": st.one_of(
        st.integers(max_value=-1), st.integers(min_value=2**64), st.text(), st.booleans()
    ),
    "output_tokens": st.one_of(st.integers(max_value=-1), st.integers(min_value=2**64), st.floats()),
    "payment": st.one_of(st.integers(max_value=-1), st.integers(min_value=2**128), st.just("20")),
    "miner_amounts": st.one_of(st.integers(), st.text(), st.just([-1]), st.just([2**256])),
    "served_roots": st.one_of(st.integers(), st.just([1]), NOT_A_WORD.map(lambda word: [word])),
    "miners": st.one_of(st.integers(), st.just(["0x12"]), st.just([7])),
    "request_count": st.one_of(st.integers(max_value=-1), st.integers(min_value=2**32), st.text()),
}


@given(commitment=COMMITMENTS, field=st.sampled_from(sorted(BAD_VALUES)), data=st.data())
def test_a_bad_field_is_refused_by_name(
    commitment: ResultCommitment, field: str, data: st.DataObject
) -> None:
    bad = commitment.to_json() | {field: data.draw(BAD_VALUES[field])}
    with pytest.raises(ValueError, match=rf"commitment('s)? .*{field}"):
        ResultCommitment.from_json(commitment.task_id, bad)


@given(commitment=COMMITMENTS, field=st.sampled_from(sorted(BAD_VALUES)))
def test_a_missing_field_is_named(commitment: ResultCommitment, field: str) -> None:
    bad = {k: v for k, v in commitment.to_json().items() if k != field}
    with pytest.raises(ValueError, match=f"the commitment has no '{field}'"):
        ResultCommitment.from_json(commitment.task_id, bad)


@pytest.mark.parametrize(("amounts", "roots"), [(0, 0), (2, 1), (33, 33)])
def test_amounts_and_served_roots_must_be_one_per_miner_for_at_most_32(amounts: int, roots: int) -> None:
    good = _commitment(1, MINERS, 5).to_json()
    bad = good | {"miner_amounts": [1] * amounts, "served_roots": ["0x" + "33" * 32] * roots}
    with pytest.raises(
        ValueError, match=f"one entry per assigned miner \\(1 to 32\\), not 2, {amounts} and {roots}"
    ):
        ResultCommitment.from_json(1, bad)


SERVED = (b"\x33" * 32, b"\x44" * 32)


MINERS = ("0x" + "33" * 20, "0x" + "44" * 20)


def _commitment(task_id: int, miners: tuple[str, ...], request_count: int) -> ResultCommitment:
    # payment 20 tokens, 5% fee -> 19 tokens to the two miners
    return ResultCommitment(
        task_id,
        b"\x11" * 32,
        400_000,
        600_000,
        20_000_000,
        (11_400_000, 7_600_000),
        SERVED,
        miners,
        request_count,
    )


def _task_commitment(task_id: int, accounts: list[LocalAccount]) -> ResultCommitment:
    """The commitment of the `task` fixture's task: its two miners, the demo's request count."""
    return _commitment(task_id, (accounts[3].address, accounts[4].address), DemoConfig().requests)


@pytest.fixture
def task(admin_market: Market, accounts: list[LocalAccount]) -> int:
    return assigned_task(admin_market, accounts[1], accounts[2], [accounts[3], accounts[4]])


def test_python_signatures_are_accepted_on_chain(
    admin_market: Market, accounts: list[LocalAccount], task: int
) -> None:
    chain_id, registry = admin_market.deployment.chain_id, admin_market.deployment.task_registry
    commitment = _task_commitment(task, accounts)
    signatures = [
        sign_commitment(m, commitment, m.address, chain_id, registry) for m in (accounts[3], accounts[4])
    ]
    assert (
        recover_signer(signatures[0], commitment, accounts[3].address, chain_id, registry)
        == accounts[3].address
    )

    admin_market.as_account(accounts[1]).tasks.commit_results(commitment, signatures)

    record = admin_market.tasks.get_task(task)
    assert record.status == TaskStatus.RESULTS_COMMITTED
    assert record.results_root == commitment.results_root
    assert (record.payment, record.fee) == (20_000_000, 1_000_000)


@pytest.mark.parametrize(
    "tamper",
    [
        "other_payment",
        "other_root",
        "other_served_root",
        "other_miner",
        "other_order",
        "other_count",
        "wrong_key",
        "other_chain",
        "flipped_byte",
    ],
)
def test_tampered_signatures_are_rejected(
    admin_market: Market, accounts: list[LocalAccount], task: int, tamper: str
) -> None:
    chain_id, registry = admin_market.deployment.chain_id, admin_market.deployment.task_registry
    commitment = _task_commitment(task, accounts)
    honest = sign_commitment(accounts[3], commitment, accounts[3].address, chain_id, registry)
    mine = accounts[4].address
    second = {
        "other_payment": sign_commitment(
            accounts[4], replace(commitment, payment=19_000_000), mine, chain_id, registry
        ),
        "other_root": sign_commitment(
            accounts[4], replace(commitment, results_root=b"\x22" * 32), mine, chain_id, registry
        ),
        "other_served_root": sign_commitment(
            accounts[4], replace(commitment, served_roots=SERVED[::-1]), mine, chain_id, registry
        ),
        "other_miner": sign_commitment(accounts[4], commitment, accounts[3].address, chain_id, registry),
        "other_order": sign_commitment(
            accounts[4], replace(commitment, miners=commitment.miners[::-1]), mine, chain_id, registry
        ),
        "other_count": sign_commitment(
            accounts[4],
            replace(commitment, request_count=commitment.request_count - 1),
            mine,
            chain_id,
            registry,
        ),
        "wrong_key": sign_commitment(accounts[5], commitment, mine, chain_id, registry),
        "other_chain": sign_commitment(accounts[4], commitment, mine, chain_id + 1, registry),
        "flipped_byte": _flip(sign_commitment(accounts[4], commitment, mine, chain_id, registry)),
    }[tamper]

    with pytest.raises(ContractRevert) as caught:
        admin_market.as_account(accounts[1]).tasks.commit_results(commitment, [honest, second])
    assert caught.value.error_name == "InvalidSignature"
    assert caught.value.error_args["miner"] == accounts[4].address
    assert admin_market.tasks.get_task(task).status == TaskStatus.ASSIGNED


def _flip(signature: bytes) -> bytes:
    return signature[:10] + bytes([signature[10] ^ 0x01]) + signature[11:]


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    task_id=st.integers(min_value=0, max_value=2**256 - 1),
    lock=st.integers(min_value=0, max_value=2**128 - 1),
    expiry=st.integers(min_value=0, max_value=2**64 - 1),
)
def test_an_acceptance_signs_the_contracts_digest(
    admin_market: Market, accounts: list[LocalAccount], task_id: int, lock: int, expiry: int
) -> None:
    """The contract's AcceptTask digest is the one a Python acceptance signs: recovering the signature over
    the contract's digest gives the miner; another task, lock or chain gives someone else."""
    chain_id, registry = admin_market.deployment.chain_id, admin_market.deployment.task_registry
    miner = accounts[3]
    accepted = sign_acceptance(miner, task_id, miner.address, lock, expiry, chain_id, registry)
    on_chain = admin_market.tasks.acceptance_digest(task_id, miner.address, lock, expiry)
    assert Account._recover_hash(on_chain, signature=accepted.signature) == miner.address
    assert acceptance_signer(accepted, task_id, miner.address, lock, chain_id, registry) == miner.address
    assert acceptance_signer(accepted, task_id, miner.address, lock ^ 1, chain_id, registry) != miner.address
    assert acceptance_signer(accepted, task_id, miner.address, lock, chain_id + 1, registry) != miner.address
    other = accounts[4].address  # a signature for one miner names it: it is no other miner's consent
    assert acceptance_signer(accepted, task_id, other, lock, chain_id, registry) != miner.address
