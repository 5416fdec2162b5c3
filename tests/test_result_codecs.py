"""The JSON forms of a result leaf (a usage witness names one) and of a result line's proof fields
(`x_batchmarket`): decoding an encoding gives the value back, and every missing, mistyped, out-of-range or
oversized field is refused with its name."""

from __future__ import annotations

import pytest
from eth_utils.address import to_checksum_address
from hypothesis import given
from hypothesis import strategies as st

from client_sdk.results import LineProof, ResultLeaf

WORDS = st.binary(min_size=32, max_size=32)
UINT32 = st.integers(min_value=0, max_value=2**32 - 1)
ADDRESSES = st.binary(min_size=20, max_size=20).map(lambda raw: to_checksum_address(raw))
PIPELINES = st.lists(ADDRESSES, max_size=4).map(tuple)
LEAVES = st.builds(
    ResultLeaf,
    task_id=st.integers(min_value=0, max_value=2**256 - 1),
    request_index=UINT32,
    custom_id_hash=WORDS,
    input_hash=WORDS,
    output_hash=WORDS,
    input_tokens=UINT32,
    output_tokens=UINT32,
    pipeline=PIPELINES,
)
PROOFS = PIPELINES.flatmap(
    lambda pipeline: st.builds(
        LineProof,
        index=UINT32,
        input_hash=WORDS,
        input_tokens=UINT32,
        output_tokens=UINT32,
        pipeline=st.just(pipeline),
        proof=st.lists(WORDS, max_size=8).map(tuple),
        served_proofs=st.lists(
            st.lists(WORDS, max_size=3).map(tuple), min_size=len(pipeline), max_size=len(pipeline)
        ).map(tuple),
    )
)
NOT_A_WORD = st.one_of(st.integers(), st.none(), st.just("0x12"), st.just("0x" + "gg" * 32))
NOT_A_UINT32 = st.one_of(st.integers(max_value=-1), st.integers(min_value=2**32), st.text(), st.booleans())
NOT_A_PIPELINE = st.one_of(st.text(), st.just(["0x1234"]), st.just([7]), st.just(["0x" + "ab" * 20] * 33))
LEAF_BAD = {
    "index": NOT_A_UINT32,
    "custom_id_hash": NOT_A_WORD,
    "input_hash": NOT_A_WORD,
    "output_hash": NOT_A_WORD,
    "input_tokens": NOT_A_UINT32,
    "output_tokens": NOT_A_UINT32,
    "pipeline": NOT_A_PIPELINE,
}
PROOF_BAD = {
    "index": NOT_A_UINT32,
    "input_hash": NOT_A_WORD,
    "input_tokens": NOT_A_UINT32,
    "output_tokens": NOT_A_UINT32,
    "pipeline": NOT_A_PIPELINE,
    "proof": st.one_of(st.text(), NOT_A_WORD.map(lambda w: [w]), st.just(["0x" + "11" * 32] * 129)),
    "served_proofs": st.one_of(st.integers(), st.just([[7]])),
}


@given(LEAVES)
def test_a_leaf_round_trips(leaf: ResultLeaf) -> None:
    assert ResultLeaf.from_json(leaf.task_id, leaf.to_json()) == leaf


@given(PROOFS)
def test_a_line_s_proof_fields_round_trip(proof: LineProof) -> None:
    assert LineProof.from_json(proof.to_json()) == proof


@given(LEAVES, st.sampled_from(sorted(LEAF_BAD)), st.data())
def test_a_bad_leaf_field_is_refused_by_name(leaf: ResultLeaf, name: str, data: st.DataObject) -> None:
    bad = leaf.to_json() | {name: data.draw(LEAF_BAD[name])}
    with pytest.raises(ValueError, match=rf"^the leaf's {name}"):
        ResultLeaf.from_json(leaf.task_id, bad)


@given(PROOFS, st.sampled_from(sorted(PROOF_BAD)), st.data())
def test_a_bad_proof_field_is_refused_by_name(proof: LineProof, name: str, data: st.DataObject) -> None:
    bad = proof.to_json() | {name: data.draw(PROOF_BAD[name])}
    with pytest.raises(ValueError, match=rf"^the line's x_batchmarket's (served_proofs|{name})"):
        LineProof.from_json(bad)


@given(LEAVES, st.sampled_from(sorted(LEAF_BAD)))
def test_a_missing_leaf_field_is_named(leaf: ResultLeaf, name: str) -> None:
    with pytest.raises(ValueError, match=f"^the leaf has no '{name}'"):
        ResultLeaf.from_json(leaf.task_id, {k: v for k, v in leaf.to_json().items() if k != name})


def test_the_proof_fields_make_the_leaf_of_their_line() -> None:
    leaf = ResultLeaf(
        3, 1, b"\x01" * 32, b"\x02" * 32, b"\x03" * 32, 5, 7, (to_checksum_address("0x" + "ab" * 20),)
    )
    fields = LineProof(1, leaf.input_hash, 5, 7, leaf.pipeline, (), ((),))
    assert fields.leaf(3, leaf.custom_id_hash, leaf.output_hash) == leaf
