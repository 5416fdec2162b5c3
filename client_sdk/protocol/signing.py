"""The signing request: what the coordinator sends a miner (`GET /v1/miners/signing`) so that it can check a
batch's result commitment before signing it (miner/node/signer.py says what it checks). One per batch waiting
for that miner: the commitment, every line the miner served (its request line, result line, pipeline and
positional proof), every leaf of the results tree (a signer vouches for the whole tree and answers the owner's
challenges of any of its lines), the usage witness (one leaf with its proof, which yields the tree's usage),
and the assigned miners with the work weights the miners' part was split by."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from client_sdk.eip712 import ResultCommitment
from client_sdk.protocol.constants import MAX_BATCH_LINES, MAX_MINERS_PER_TASK
from client_sdk.protocol.fields import addresses, field, uint, words
from client_sdk.results import MAX_RESULTS_PROOF_WORDS, ResultLeaf

WHAT = "the signing request"


@dataclass(frozen=True)
class SigningLine:
    """A line the miner served: the request line as uploaded, the result line, its pipeline and its positional
    proof in the results tree."""

    index: int
    request: str
    line: dict[str, Any]
    pipeline: tuple[str, ...]
    proof: tuple[bytes, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "request": self.request,
            "line": self.line,
            "pipeline": list(self.pipeline),
            "proof": ["0x" + p.hex() for p in self.proof],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any], what: str) -> SigningLine:
        return cls(
            index=uint(field(data, "index", int, what), 32, "index", what),
            request=field(data, "request", str, what),
            line=field(data, "line", dict, what),
            pipeline=addresses(field(data, "pipeline", list, what), "pipeline", what, MAX_MINERS_PER_TASK),
            proof=words(field(data, "proof", list, what), "proof", what, MAX_RESULTS_PROOF_WORDS),
        )


@dataclass(frozen=True)
class SigningRequest:
    batch_id: str
    commitment: ResultCommitment  # its task id is the request's
    request_count: int
    lines: tuple[SigningLine, ...]
    leaves: tuple[ResultLeaf, ...]  # every leaf of the results tree, in request order
    witness: ResultLeaf
    witness_proof: tuple[bytes, ...]
    miners: tuple[str, ...]
    weights: tuple[int, ...]

    @property
    def task_id(self) -> int:
        return self.commitment.task_id

    def to_json(self) -> dict[str, Any]:
        return {
            "batch_id": self.batch_id,
            "task_id": self.task_id,
            "request_count": self.request_count,
            "commitment": self.commitment.to_json(),
            "lines": [line.to_json() for line in self.lines],
            "leaves": [leaf.to_json() for leaf in self.leaves],
            "usage_witness": self.witness.to_json() | {"proof": ["0x" + p.hex() for p in self.witness_proof]},
            "miners": list(self.miners),
            "weights": list(self.weights),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SigningRequest:
        """The inverse of `to_json`, checked (ValueError naming the field): at most MAX_BATCH_LINES lines and
        leaves and MAX_MINERS_PER_TASK miners, one work weight per miner."""
        task_id = uint(field(data, "task_id", int, WHAT), 256, "task_id", WHAT)
        lines = field(data, "lines", list, WHAT)
        leaves = field(data, "leaves", list, WHAT)
        for name, items in (("lines", lines), ("leaves", leaves)):
            if len(items) > MAX_BATCH_LINES:
                raise ValueError(f"{WHAT}'s {name} must be at most {MAX_BATCH_LINES}, not {len(items)}")
        witness = field(data, "usage_witness", dict, WHAT)
        miners = addresses(field(data, "miners", list, WHAT), "miners", WHAT, MAX_MINERS_PER_TASK)
        weights = field(data, "weights", list, WHAT)
        if len(weights) != len(miners):
            raise ValueError(f"{WHAT}'s weights must hold one work weight per miner ({len(miners)})")
        return cls(
            batch_id=field(data, "batch_id", str, WHAT),
            commitment=ResultCommitment.from_json(task_id, field(data, "commitment", dict, WHAT)),
            request_count=uint(field(data, "request_count", int, WHAT), 32, "request_count", WHAT),
            lines=tuple(SigningLine.from_json(line, f"{WHAT}'s lines[{i}]") for i, line in enumerate(lines)),
            leaves=tuple(ResultLeaf.from_json(task_id, _mapping(leaf, i)) for i, leaf in enumerate(leaves)),
            witness=ResultLeaf.from_json(task_id, witness),
            witness_proof=words(
                field(witness, "proof", list, "the usage witness"),
                "proof",
                "the usage witness",
                MAX_RESULTS_PROOF_WORDS,
            ),
            miners=miners,
            weights=tuple(uint(w, 256, f"weights[{i}]", WHAT) for i, w in enumerate(weights)),
        )


def _mapping(value: Any, index: int) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ValueError(f"{WHAT}'s leaves[{index}] must be an object")
    return value
