"""Merkle proofs built in Python verify with OpenZeppelin's MerkleProof on-chain (through the contract's own
leaf check), for every leaf count including odd ones; a changed leaf never verifies."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from client_sdk.chain.contracts import Market
from client_sdk.merkle import MerkleTree, verify
from client_sdk.results import ResultLeaf

ADDRESS = st.binary(min_size=20, max_size=20).map(lambda b: "0x" + b.hex())
HASH = st.binary(min_size=32, max_size=32)
UINT32 = st.integers(min_value=0, max_value=2**32 - 1)


def leaves_for(task_id: int, count: int, seed: int) -> list[ResultLeaf]:
    return [
        ResultLeaf(
            task_id=task_id,
            request_index=i,
            custom_id_hash=(seed * 1000 + i).to_bytes(32, "big"),
            input_hash=(i + 1).to_bytes(32, "big"),
            output_hash=(seed + i).to_bytes(32, "big"),
            input_tokens=i * 7,
            output_tokens=i * 11,
            pipeline=("0x" + f"{i + 1:040x}",),
        )
        for i in range(count)
    ]


@st.composite
def leaf_sets(draw: st.DrawFn) -> list[ResultLeaf]:
    count = draw(st.integers(min_value=1, max_value=40))
    task_id = draw(st.integers(min_value=1, max_value=2**64))
    return [
        ResultLeaf(
            task_id=task_id,
            request_index=i,
            custom_id_hash=draw(HASH),
            input_hash=draw(HASH),
            output_hash=draw(HASH),
            input_tokens=draw(UINT32),
            output_tokens=draw(UINT32),
            pipeline=tuple(draw(st.lists(ADDRESS, min_size=0, max_size=4))),
        )
        for i in range(count)
    ]


@given(leaf_sets())
def test_every_python_proof_verifies_in_python(leaves: list[ResultLeaf]) -> None:
    tree = MerkleTree([leaf.hash() for leaf in leaves])
    for i, leaf in enumerate(leaves):
        assert verify(tree.proof(i), tree.root, leaf.hash())


@pytest.mark.parametrize("count", range(1, 18))
def test_every_proof_verifies_on_chain_for_each_leaf_count(admin_market: Market, count: int) -> None:
    leaves = leaves_for(task_id=count, count=count, seed=count)
    tree = MerkleTree([leaf.hash() for leaf in leaves])
    for i, leaf in enumerate(leaves):
        assert admin_market.arbitration.verify_leaf(tree.root, leaf, tree.proof(i)), f"leaf {i} of {count}"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(leaves=leaf_sets(), data=st.data())
def test_random_trees_on_chain_and_changed_leaves_fail(
    admin_market: Market, leaves: list[ResultLeaf], data: st.DataObject
) -> None:
    tree = MerkleTree([leaf.hash() for leaf in leaves])
    index = data.draw(st.integers(min_value=0, max_value=len(leaves) - 1))
    leaf, proof = leaves[index], tree.proof(index)
    assert admin_market.arbitration.verify_leaf(tree.root, leaf, proof)

    field = data.draw(st.sampled_from(["output_hash", "output_tokens", "pipeline", "request_index"]))
    changed = {
        "output_hash": replace(leaf, output_hash=bytes(32 - len(b"x")) + b"x"),
        "output_tokens": replace(leaf, output_tokens=(leaf.output_tokens + 1) % 2**32),
        "pipeline": replace(leaf, pipeline=(*leaf.pipeline, "0x" + "ab" * 20)),
        "request_index": replace(leaf, request_index=(leaf.request_index + 1) % 2**32),
    }[field]
    if changed.hash() == leaf.hash():  # only possible if the drawn output_hash already equalled the new one
        return
    assert not verify(proof, tree.root, changed.hash())
    assert not admin_market.arbitration.verify_leaf(tree.root, changed, proof)


def test_leaf_hash_matches_contract_encoding(admin_market: Market) -> None:
    """A one-leaf tree's root is the leaf hash itself: the contract accepts it with an empty proof only if
    Python's double-hashed abi encoding is byte-identical to ResultLeaf.hash in Solidity."""
    (leaf,) = leaves_for(task_id=99, count=1, seed=5)
    assert admin_market.arbitration.verify_leaf(leaf.hash(), leaf, [])
    assert not admin_market.arbitration.verify_leaf(leaf.hash(), replace(leaf, task_id=98), [])


def test_empty_tree_and_bad_index_are_rejected() -> None:
    with pytest.raises(ValueError, match="at least one leaf"):
        MerkleTree([])
    with pytest.raises(IndexError, match="leaf 3 is outside a tree of 2 leaves"):
        MerkleTree([bytes(32), bytes(31) + b"\x01"]).proof(3)
