"""The signing request (client_sdk/protocol/signing.py) the coordinator sends a miner: its JSON form round
trips, and what a hostile or broken coordinator could send instead (fields missing or mistyped, too many
lines, leaves or miners, a weight per miner missing, a malformed witness, line or leaf) is refused with the
field named, before the miner checks anything else."""

from __future__ import annotations

import pytest
from eth_utils.address import to_checksum_address
from hypothesis import given
from hypothesis import strategies as st

from client_sdk.eip712 import ResultCommitment
from client_sdk.protocol.constants import MAX_BATCH_LINES
from client_sdk.protocol.signing import SigningLine, SigningRequest
from client_sdk.results import ResultLeaf

WORDS = st.binary(min_size=32, max_size=32)
ADDRESSES = st.binary(min_size=20, max_size=20).map(lambda raw: to_checksum_address(raw))
UINT32 = st.integers(min_value=0, max_value=2**32 - 1)


@st.composite
def requests(draw: st.DrawFn) -> SigningRequest:
    miners = tuple(draw(st.lists(ADDRESSES, min_size=1, max_size=4, unique=True)))
    task_id = draw(st.integers(min_value=0, max_value=2**64))
    commitment = ResultCommitment(
        task_id,
        draw(WORDS),
        draw(UINT32),
        draw(UINT32),
        draw(st.integers(min_value=0, max_value=2**128 - 1)),
        tuple(draw(st.integers(min_value=0, max_value=2**64)) for _ in miners),
        tuple(draw(WORDS) for _ in miners),
        miners,
        draw(UINT32),
    )
    line = SigningLine(
        draw(UINT32),
        draw(st.text(max_size=20)),
        {"custom_id": draw(st.text(max_size=8))},
        miners[:1],
        (draw(WORDS),),
    )
    witness = ResultLeaf(task_id, draw(UINT32), draw(WORDS), draw(WORDS), draw(WORDS), 3, 4, miners[:1])
    return SigningRequest(
        batch_id=draw(st.text(min_size=1, max_size=12)),
        commitment=commitment,
        request_count=draw(st.integers(min_value=1, max_value=2**32 - 1)),
        lines=draw(st.lists(st.just(line), max_size=3).map(tuple)),
        leaves=draw(st.lists(st.just(witness), max_size=3).map(tuple)),
        witness=witness,
        witness_proof=tuple(draw(st.lists(WORDS, max_size=4))),
        miners=miners,
        weights=tuple(draw(st.integers(min_value=0, max_value=2**64)) for _ in miners),
    )


@given(requests())
def test_the_signing_request_round_trips(request: SigningRequest) -> None:
    assert SigningRequest.from_json(request.to_json()) == request


BREAKS = {
    "batch_id": (lambda r: r | {"batch_id": 7}, "the signing request's batch_id must be a JSON string"),
    "task_id": (
        lambda r: {k: v for k, v in r.items() if k != "task_id"},
        "the signing request has no 'task_id'",
    ),
    "weights": (lambda r: r | {"weights": [*r["weights"], 1]}, "weights must hold one work weight per miner"),
    "miners": (lambda r: r | {"miners": ["0x12"] * len(r["miners"])}, r"miners\[0\] must be an address"),
    "lines": (
        lambda r: r | {"lines": [{}] * (MAX_BATCH_LINES + 1)},
        f"lines must be at most {MAX_BATCH_LINES}",
    ),
    "line": (lambda r: r | {"lines": [{"index": -1}]}, r"lines\[0\]'s index must be an integer"),
    "leaves": (
        lambda r: r | {"leaves": [{}] * (MAX_BATCH_LINES + 1)},
        f"leaves must be at most {MAX_BATCH_LINES}",
    ),
    "leaf": (lambda r: r | {"leaves": [7]}, r"leaves\[0\] must be an object"),
    "leaf field": (
        lambda r: r | {"leaves": [r["usage_witness"] | {"input_hash": "0x00"}]},
        "the leaf's input_hash must be a 32-byte hex word",
    ),
    "witness": (
        lambda r: r | {"usage_witness": r["usage_witness"] | {"output_hash": "0x00"}},
        "the leaf's output_hash must be a 32-byte hex word",
    ),
    "witness proof": (
        lambda r: r | {"usage_witness": r["usage_witness"] | {"proof": "0x"}},
        "the usage witness's proof must be a JSON array",
    ),
    "commitment": (
        lambda r: r | {"commitment": r["commitment"] | {"payment": -1}},
        r"the commitment's payment must be an integer in \[0, 2\^128\)",
    ),
}


@pytest.mark.parametrize("what", sorted(BREAKS))
@given(request=requests())
def test_a_broken_request_is_refused_naming_the_field(what: str, request: SigningRequest) -> None:
    change, message = BREAKS[what]
    with pytest.raises(ValueError, match=message):
        SigningRequest.from_json(change(request.to_json()))
