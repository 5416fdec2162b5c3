"""The typed views of on-chain structs mirror the contracts' ABIs field for field, and decode what web3
returns into exactly typed values."""

from __future__ import annotations

import dataclasses
import typing
from enum import IntEnum
from typing import Any

import pytest
from hexbytes import HexBytes

from client_sdk.abis import load_abi
from client_sdk.chain.types import (
    ArbitrationConfig,
    Audit,
    Dispute,
    DisputeStatus,
    Juror,
    MinerProfile,
    Round,
    Stake,
    Terms,
    Verifier,
    Vote,
)
from client_sdk.protocol.structs import from_abi
from client_sdk.protocol.task import Task, TaskPrices, TaskStatus, TaskTerms

# what client_sdk.chain.contracts decodes with from_abi: (contract, function, view)
VIEWS = [
    ("GPURegistry", "profileOf", MinerProfile),
    ("GPURegistry", "stakeOf", Stake),
    ("TaskRegistry", "getTask", Task),
    ("TaskRegistry", "pricesOf", TaskPrices),
    ("TaskRegistry", "termsOf", TaskTerms),
    ("VerifierRegistry", "verifierOf", Verifier),
    ("Arbitration", "config", ArbitrationConfig),
    ("Arbitration", "configOf", ArbitrationConfig),
    ("Arbitration", "getDispute", Dispute),
    ("Arbitration", "roundOf", Round),
    ("Arbitration", "jurorOf", Juror),
    ("Arbitration", "auditOf", Audit),
]


def outputs(contract: str, function: str) -> list[dict[str, Any]]:
    """The values a call returns: a single struct's components, or the function's outputs."""
    (item,) = [i for i in load_abi(contract) if i.get("type") == "function" and i["name"] == function]
    found: list[dict[str, Any]] = item["outputs"]
    return found[0]["components"] if len(found) == 1 and found[0]["type"] == "tuple" else found


def mirrors(kind: Any, abi: dict[str, Any]) -> bool:
    """Whether a field of Python type `kind` holds the ABI type `abi` exactly as from_abi decodes it."""
    solidity, internal = abi["type"], abi.get("internalType", "")
    if solidity.endswith("[]"):
        element = {**abi, "type": solidity[:-2], "internalType": internal.removesuffix("[]")}
        return typing.get_origin(kind) is tuple and mirrors(typing.get_args(kind)[0], element)
    if solidity == "tuple":
        return dataclasses.is_dataclass(kind) and fields_mirror(kind, abi["components"])
    if internal.startswith("enum "):
        return isinstance(kind, type) and issubclass(kind, IntEnum) and internal.endswith("." + kind.__name__)
    if solidity.startswith(("uint", "int")):
        return kind is int
    if solidity.startswith("bytes"):
        return kind is bytes
    return kind is {"address": str, "string": str, "bool": bool}[solidity]


def fields_mirror(view: type, components: list[dict[str, Any]]) -> bool:
    hints = typing.get_type_hints(view)
    fields = dataclasses.fields(view)  # type: ignore[arg-type]
    return len(fields) == len(components) and all(
        mirrors(hints[field.name], abi) for field, abi in zip(fields, components, strict=True)
    )


@pytest.mark.parametrize(("contract", "function", "view"), VIEWS)
def test_each_view_mirrors_its_struct(contract: str, function: str, view: type) -> None:
    assert fields_mirror(view, outputs(contract, function)), f"{view.__name__} drifted from {function}"


def test_web3_values_decode_to_exact_types() -> None:
    terms = [3600, 5000, 1000, 100, 5, 10**18]
    raw = (
        7,
        "0x" + "ab" * 20,
        "0x" + "cd" * 20,
        1,
        True,
        0,
        9,
        120,
        1_700_000_000,
        10**18,
        HexBytes(b"\x01" * 32),
        terms,
    )
    dispute = from_abi(Dispute, raw)
    assert dispute == Dispute(
        7,
        "0x" + "ab" * 20,
        "0x" + "cd" * 20,
        DisputeStatus.OPEN,
        True,
        0,
        9,
        120,
        1_700_000_000,
        10**18,
        b"\x01" * 32,
        Terms(*terms),
    )
    assert type(dispute.status) is DisputeStatus and type(dispute.leaf_hash) is bytes
    assert type(dispute.terms) is Terms
    signer, gpu, region, model = (
        "0x" + "11" * 20,
        HexBytes(b"g" * 32),
        HexBytes(b"r" * 32),
        HexBytes(b"m" * 32),
    )
    profile = from_abi(MinerProfile, (signer, gpu, 80, 1, region, 5, "tcp://x:1", [model]))
    assert profile.model_ids == (b"m" * 32,) and type(profile.model_ids[0]) is bytes
    assert from_abi(Juror, (2, 1, HexBytes(b"\x00" * 32))) == Juror(2, Vote.MINERS_CORRECT, b"\x00" * 32)
    assert from_abi(Task, [0] * 2 + [5] + [0] * 4 + [b""] * 4 + [0] * 5).status is TaskStatus.FINALIZED


def test_a_tuple_of_another_length_is_refused() -> None:
    with pytest.raises(ValueError, match="Juror has 3 fields; the struct has 2"):
        from_abi(Juror, (2, 1))
    with pytest.raises(ValueError, match="not a valid DisputeStatus"):
        from_abi(Dispute, (7, "a", "b", 9, True, 0, 9, 120, 1, 1, b"", [0] * 6))
