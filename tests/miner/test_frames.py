"""Stage messages round-trip exactly, and every malformed message is rejected with its reason."""

from __future__ import annotations

import msgpack
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from miner.transport.frames import DTYPES, FrameError, Header, Limits, decode, encode


def header_for(tensor: torch.Tensor, dtype: str, **overrides: object) -> Header:
    fields: dict[str, object] = {
        "kind": "activations",
        "microbatch": 3,
        "request_ids": (7, 9),
        "positions": (0, 12),
        "query_lens": (5, 1),
        "route": ("tcp://a:1", "tcp://b:2"),
        "dtype": dtype,
        "shape": tuple(tensor.shape),
    }
    fields.update(overrides)
    return Header(**fields)  # type: ignore[arg-type]


@given(
    dtype=st.sampled_from(sorted(DTYPES)),
    shape=st.lists(st.integers(0, 6), min_size=1, max_size=3),
    seed=st.integers(0, 2**16),
)
def test_round_trip_is_bit_exact(dtype: str, shape: list[int], seed: int) -> None:
    torch.manual_seed(seed)
    tensor = (torch.randn(shape) * 100).to(DTYPES[dtype])
    header = header_for(tensor, dtype)
    got_header, got = decode(encode(header, tensor))
    assert got_header == header
    assert got.dtype == tensor.dtype
    assert torch.equal(got.reshape(-1).view(torch.uint8), tensor.reshape(-1).view(torch.uint8))


def frames_with(**changes: object) -> list[bytes]:
    tensor = torch.zeros(2, 3)
    fields = header_for(tensor, "float32").as_dict()
    fields.update(changes)
    return [msgpack.packb(fields), tensor.numpy().tobytes()]


@pytest.mark.parametrize(
    ("frames", "reason"),
    [
        ([b"x"], "expected 2 frames, got 1"),
        ([b"\xc1", b""], "header is not valid msgpack"),
        ([msgpack.packb([1, 2]), b""], "header is not a map"),
        (frames_with(v=2), "protocol version 2 is not 1"),
        (frames_with(kind="pickle"), "kind 'pickle' is not one of"),
        (frames_with(microbatch=-1), "microbatch must be a non-negative integer"),
        (frames_with(microbatch=True), "microbatch must be a non-negative integer"),
        (frames_with(request_ids=[1]), "request_ids, positions and query_lens differ in length"),
        (frames_with(route=[1]), "route must be a list of at most 64 strings"),
        (frames_with(dtype="object"), "dtype 'object' is not one of"),
        (frames_with(shape=[2, 4]), "payload is 24 bytes, header describes 32"),
        (frames_with(extra=1), "header keys"),
    ],
)
def test_malformed_messages_are_rejected(frames: list[bytes], reason: str) -> None:
    with pytest.raises(FrameError, match=reason.replace("(", r"\(")):
        decode(frames)


def test_truncated_and_oversized_payloads() -> None:
    good = frames_with()
    with pytest.raises(FrameError, match="payload is 20 bytes, header describes 24"):
        decode([good[0], good[1][:-4]])
    with pytest.raises(FrameError, match="payload of 24 bytes exceeds 16"):
        decode(good, Limits(max_payload_bytes=16))
    with pytest.raises(FrameError, match=r"header of \d+ bytes exceeds 8"):
        decode(good, Limits(max_header_bytes=8))


def test_encode_refuses_a_header_that_lies() -> None:
    tensor = torch.zeros(2, 3)
    with pytest.raises(FrameError, match="do not describe the tensor"):
        encode(header_for(tensor, "float16"), tensor)
