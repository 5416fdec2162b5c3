"""The typed views of on-chain structs mirror the contracts' ABIs field for field, decode what web3
returns into exactly typed values and encode back (to_abi) to the same ABI encoding; the structs the SDK sends
mirror the functions' parameters."""

from __future__ import annotations

import dataclasses
import typing
from enum import IntEnum
from typing import Any

import pytest
from eth_abi.abi import encode
from hexbytes import HexBytes
from hypothesis import given
from hypothesis import strategies as st

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
from client_sdk.eip712 import Acceptance, ResultCommitment
from client_sdk.protocol.structs import from_abi, to_abi
from client_sdk.protocol.task import Task, TaskPrices, TaskStatus, TaskTerms
from client_sdk.results import ResultLeaf

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
    ("Audits", "auditOf", Audit),
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
        HexBytes(b"m" * 32),
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
        b"m" * 32,
        Terms(*terms),
    )
    assert type(dispute.status) is DisputeStatus and type(dispute.leaf_hash) is bytes
    assert type(dispute.model_id) is bytes
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
        from_abi(Dispute, (7, "a", "b", 9, True, 0, 9, 120, 1, 1, b"", b"", [0] * 6))


# what client_sdk.chain.contracts encodes with to_abi: (contract, function, parameter, struct, fields left
# out of it at its start and at its end)
SENT = [
    ("GPURegistry", "register", "profile", MinerProfile, (0, 0)),
    ("TaskRegistry", "assignTask", "acceptances", Acceptance, (0, 0)),
    ("TaskRegistry", "refuteUsage", "leaf", ResultLeaf, (0, 0)),
    # the task id travels beside it; the miners and request count it is signed with are the task's own
    ("TaskRegistry", "commitResults", "c", ResultCommitment, (1, 2)),
    ("Arbitration", "setConfig", "newConfig", ArbitrationConfig, (0, 0)),
]


def parameter(contract: str, function: str, name: str) -> dict[str, Any]:
    (item,) = [i for i in load_abi(contract) if i.get("type") == "function" and i["name"] == function]
    (found,) = [p for p in item["inputs"] if p["name"] == name]
    entry: dict[str, Any] = found
    return entry


def element(abi: dict[str, Any]) -> dict[str, Any]:
    """An array's element type, as its own ABI entry."""
    return {**abi, "type": abi["type"][:-2], "internalType": abi.get("internalType", "").removesuffix("[]")}


@pytest.mark.parametrize(("contract", "function", "name", "struct", "left_out"), SENT)
def test_each_struct_sent_mirrors_its_parameter(
    contract: str, function: str, name: str, struct: type, left_out: tuple[int, int]
) -> None:
    abi = parameter(contract, function, name)
    components = (element(abi) if abi["type"].endswith("[]") else abi)["components"]
    hints = typing.get_type_hints(struct)
    every = dataclasses.fields(struct)
    fields = every[left_out[0] : len(every) - left_out[1]]
    assert len(fields) == len(components), f"{struct.__name__} drifted from {function}({name})"
    assert all(mirrors(hints[f.name], c) for f, c in zip(fields, components, strict=True))


def abi_type(abi: dict[str, Any]) -> str:
    """The canonical type string eth_abi encodes by: tuple(...) spelled out as (...)."""
    if abi["type"].startswith("tuple"):
        return "(" + ",".join(map(abi_type, abi["components"])) + ")" + str(abi["type"]).removeprefix("tuple")
    return str(abi["type"])


def abi_values(abi: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values web3 could return for the ABI type `abi` (every one within its type's range)."""
    solidity, internal = abi["type"], abi.get("internalType", "")
    if solidity.endswith("[]"):
        return st.lists(abi_values(element(abi)), max_size=3)
    if solidity == "tuple":
        return st.tuples(*map(abi_values, abi["components"]))
    if internal.startswith("enum "):
        return st.integers(0, 2)  # every enum here has at least three members
    if solidity.startswith("uint"):
        return st.integers(0, 2 ** int(solidity[4:] or 256) - 1)
    if solidity.startswith("bytes") and solidity != "bytes":
        return st.binary(min_size=int(solidity[5:]), max_size=int(solidity[5:]))
    strategies: dict[str, st.SearchStrategy[Any]] = {
        "bytes": st.binary(max_size=40),
        "string": st.text(max_size=20),
        "bool": st.booleans(),
        "address": st.binary(min_size=20, max_size=20).map(lambda raw: "0x" + raw.hex()),
    }
    return strategies[solidity]


STRUCTS = [(c, f, v) for c, f, v in VIEWS if v is not TaskPrices]  # pricesOf returns two values, no struct


@pytest.mark.parametrize(("contract", "function", "view"), STRUCTS)
@given(data=st.data())
def test_to_abi_encodes_exactly_what_from_abi_decoded(
    contract: str, function: str, view: type, data: st.DataObject
) -> None:
    """Any value the chain returns, decoded and encoded again, is the same ABI encoding: to_abi is from_abi's
    inverse, field for field and type for type."""
    components = outputs(contract, function)
    struct = {"type": "tuple", "components": components}
    raw = data.draw(abi_values(struct))
    assert encode([abi_type(struct)], [to_abi(from_abi(view, raw))]) == encode([abi_type(struct)], [raw])
