"""Merkle proofs built in Python: sorted-pair and positional sum trees verify in Python for every leaf count,
a positional proof holds at its own position only and yields the tree's total usage, and the chain holds each
committed leaf to the miners whose served root contains it (the byte-level agreement with the contracts is in
tests/test_protocol_vectors.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from eth_account.signers.local import LocalAccount
from hypothesis import given
from hypothesis import strategies as st

from client_sdk.chain.contracts import Market
from client_sdk.errors import ContractRevert
from client_sdk.merkle import MerkleTree, SumTree, Usage, root_at, verify
from client_sdk.results import ResultLeaf, ResultTrees
from tests.helpers import committed_task

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


def sum_tree(leaves: list[ResultLeaf]) -> SumTree:
    return SumTree([leaf.hash() for leaf in leaves], [leaf.usage for leaf in leaves])


@given(leaf_sets())
def test_every_python_proof_verifies_in_python_and_yields_the_total_usage(leaves: list[ResultLeaf]) -> None:
    hashes = [leaf.hash() for leaf in leaves]
    sorted_tree, positional = MerkleTree(hashes), sum_tree(leaves)
    total = Usage(sum(leaf.input_tokens for leaf in leaves), sum(leaf.output_tokens for leaf in leaves))
    assert positional.usage == total
    for i, leaf in enumerate(leaves):
        assert verify(sorted_tree.proof(i), sorted_tree.root, hashes[i])
        assert root_at(positional.proof(i), hashes[i], leaf.usage, i, len(hashes)) == (positional.root, total)


@given(leaves=leaf_sets(), data=st.data())
def test_a_positional_proof_holds_at_its_own_position_only(
    leaves: list[ResultLeaf], data: st.DataObject
) -> None:
    tree = sum_tree(leaves)
    index = data.draw(st.integers(min_value=0, max_value=len(leaves) - 1))
    other = data.draw(st.integers(min_value=0, max_value=len(leaves)))
    leaf_hash, usage, proof = leaves[index].hash(), leaves[index].usage, tree.proof(index)
    found = root_at(proof, leaf_hash, usage, other, len(leaves))
    assert (found is not None and found[0] == tree.root) == (other == index)
    assert root_at([*proof, bytes(32), bytes(32)], leaf_hash, usage, index, len(leaves)) is None
    if proof:
        assert root_at(proof[:-2], leaf_hash, usage, index, len(leaves)) is None
        assert root_at(proof[:-1], leaf_hash, usage, index, len(leaves)) is None


@given(leaves=leaf_sets().filter(lambda ls: len(ls) > 1), data=st.data())
def test_no_leaf_or_usage_word_can_be_changed(leaves: list[ResultLeaf], data: st.DataObject) -> None:
    """A leaf's counts, or a sibling's usage word, changed by any amount no longer prove into the root; a word
    with bits above the two counts is refused outright."""
    tree = sum_tree(leaves)
    index = data.draw(st.integers(min_value=0, max_value=len(leaves) - 1))
    leaf_hash, proof = leaves[index].hash(), tree.proof(index)
    delta = data.draw(st.integers(min_value=1, max_value=2**32))
    more = Usage(leaves[index].input_tokens, leaves[index].output_tokens + delta)
    changed = root_at(proof, leaf_hash, more, index, len(leaves))
    assert changed is None or changed[0] != tree.root
    word = int.from_bytes(proof[1], "big")
    bent = [proof[0], (word + delta).to_bytes(32, "big"), *proof[2:]]
    found = root_at(bent, leaf_hash, leaves[index].usage, index, len(leaves))
    assert found is None or found[0] != tree.root
    high = [proof[0], (word | 1 << 128).to_bytes(32, "big"), *proof[2:]]
    assert root_at(high, leaf_hash, leaves[index].usage, index, len(leaves)) is None


def test_the_chain_holds_each_leaf_to_the_miners_who_signed_it(
    admin_market: Market, accounts: list[LocalAccount]
) -> None:
    """Every committed leaf proves on-chain at its position with its served proofs and names its pipeline; a
    changed leaf, another line's proof or proofs left out do not."""
    coordinator, user, miners = accounts[1], accounts[2], accounts[3:5]
    task = committed_task(admin_market, coordinator, user, miners)
    tasks, trees = admin_market.tasks, task.trees
    for i, leaf in enumerate(task.leaves):
        assert tasks.accountable_for(leaf, trees.proof(i), trees.served_proofs(i)) == list(leaf.pipeline)
    leaf = task.leaves[1]
    for changed in (replace(leaf, output_tokens=leaf.output_tokens + 1), replace(leaf, request_index=2)):
        with pytest.raises(ContractRevert, match="InvalidProof"):
            tasks.accountable_for(changed, trees.proof(1), trees.served_proofs(1))
    with pytest.raises(ContractRevert, match="InvalidProof"):
        tasks.accountable_for(leaf, trees.proof(2), trees.served_proofs(1))
    with pytest.raises(ContractRevert, match="NoAccountableMiner"):
        tasks.accountable_for(leaf, trees.proof(1), [[] for _ in leaf.pipeline])


def test_empty_tree_and_bad_index_are_rejected() -> None:
    with pytest.raises(ValueError, match="at least one leaf"):
        MerkleTree([])
    with pytest.raises(IndexError, match="leaf 3 is outside a tree of 2 leaves"):
        MerkleTree([bytes(32), bytes(31) + b"\x01"]).proof(3)
    with pytest.raises(ValueError, match="overflow uint64"):
        SumTree([bytes(32), bytes(32)], [Usage(2**64 - 1, 0), Usage(1, 0)])
    with pytest.raises(ValueError, match="one leaf per request"):
        ResultTrees(leaves_for(task_id=1, count=3, seed=1)[1:], [])
