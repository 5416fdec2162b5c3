"""The committed protocol test vectors are exactly what the Python protocol code builds today; forge checks
the same file against the contracts (contracts/test/ProtocolVectors.t.sol)."""

from __future__ import annotations

from client_sdk.merkle import Usage, root_at, verify
from client_sdk.results import ZERO_ROOT
from tests.protocol_vectors import VECTORS_FILE, build, render


def test_python_builds_the_committed_vectors() -> None:
    assert VECTORS_FILE.read_text() == render(), "formats changed: run `python -m tests.protocol_vectors`"


def test_every_vector_proof_verifies_only_at_its_own_position_and_yields_the_usage() -> None:
    vectors = build()
    root, count = bytes.fromhex(vectors["resultsRoot"][2:]), vectors["requestCount"]
    total = Usage(vectors["commitment"]["inputTokens"], vectors["commitment"]["outputTokens"])
    served = dict(zip(vectors["miners"], vectors["servedRoots"], strict=True))
    for leaf in vectors["leaves"]:
        leaf_hash = bytes.fromhex(leaf["hash"][2:])
        usage = Usage(leaf["inputTokens"], leaf["outputTokens"])
        proof = [bytes.fromhex(p[2:]) for p in leaf["proof"]]
        for index in range(count + 1):
            found = root_at(proof, leaf_hash, usage, index, count)
            assert (found == (root, total)) == (index == leaf["requestIndex"])
        for miner, served_proof in zip(leaf["pipeline"], leaf["servedProofs"], strict=True):
            served_root = bytes.fromhex(served[miner][2:])
            assert served_root != ZERO_ROOT
            assert verify([bytes.fromhex(p[2:]) for p in served_proof], served_root, leaf_hash)
    assert served[vectors["miners"][2]] == "0x" + ZERO_ROOT.hex(), "a miner that served nothing signs zero"
