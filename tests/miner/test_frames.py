"""Stage messages round-trip exactly, and every malformed message is rejected with its reason."""

from __future__ import annotations

import contextlib

import msgpack
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from client_sdk.protocol.sampling import SamplingParams
from miner.transport.frames import (
    DTYPES,
    PROTOCOL_VERSION,
    Finished,
    FrameError,
    Header,
    Limits,
    RequestSpec,
    decode,
    encode,
    message,
)


def activations(tensor: torch.Tensor) -> tuple[Header, torch.Tensor]:
    """Two requests: 5 prompt tokens of request 7 (new, sampled), 1 decode token of request 9."""
    return message(
        "activations",
        3,
        request_ids=(7, 9),
        positions=(0, 12),
        query_lens=(5, 1),
        token_ids=(1, 2, 3, 4, 5, 6),
        sample=(True, False),
        new_requests=(RequestSpec(7, 5, SamplingParams(16, 0.7, 0.9, 2**40, (2,))),),
        finished=(Finished(4, 20, 11),),
        preempted=(8,),
        route=("tcp://a:1", "tcp://b:2"),
        tensor=tensor,
        epoch=(5, 1_790_000_000_123_456_789),  # plan 5, a head session drawn from the clock in nanoseconds
    )


@given(
    dtype=st.sampled_from(sorted(DTYPES)),
    width=st.integers(0, 6),
    seed=st.integers(0, 2**16),
)
def test_round_trip_is_bit_exact(dtype: str, width: int, seed: int) -> None:
    torch.manual_seed(seed)
    tensor = (torch.randn(6, width) * 100).to(DTYPES[dtype])
    header, _ = activations(tensor)
    got_header, got = decode(encode(header, tensor))
    assert got_header == header
    assert got.dtype == tensor.dtype
    assert torch.equal(got.reshape(-1).view(torch.uint8), tensor.reshape(-1).view(torch.uint8))


@given(
    runs=st.lists(st.lists(st.integers(0, 2**31), max_size=5), max_size=6),
    kind=st.sampled_from(["submit", "completions"]),  # tokens carry one per request
)
def test_token_runs_split_per_request(runs: list[list[int]], kind: str) -> None:
    header, tensor = message(
        kind,
        request_ids=tuple(range(len(runs))),
        query_lens=tuple(len(r) for r in runs),
        token_ids=tuple(t for r in runs for t in r),
    )
    got, _ = decode(encode(header, tensor))
    assert got.token_runs() == [tuple(r) for r in runs]


def frames_with(**changes: object) -> list[bytes]:
    tensor = torch.zeros(6, 3)
    fields = activations(tensor)[0].as_dict()
    fields.update(changes)
    return [msgpack.packb(fields), tensor.numpy().tobytes()]


PARAMS: list[object] = [16, 0.7, 0.9, 3, [2]]  # max_tokens, temperature, top_p, seed, stop ids


def sampled(index: int, value: object) -> list[list[object]]:
    """A new request [id 7, prompt_len 5, PARAMS], with one of its sampling parameters changed."""
    params = list(PARAMS)
    params[index] = value
    return [[7, 5, params]]


@pytest.mark.parametrize(
    ("frames", "reason"),
    [
        ([b"x"], "expected 2 frames, got 1"),
        ([b"\xc1", b""], "header is not valid msgpack"),
        ([msgpack.packb([1, 2]), b""], "header is not a map"),
        (frames_with(v=2), f"protocol version 2 is not {PROTOCOL_VERSION}"),
        (frames_with(kind="pickle"), "kind 'pickle' is not one of"),
        (frames_with(microbatch=-1), "microbatch must be a non-negative integer"),
        (frames_with(microbatch=True), "microbatch must be a non-negative integer"),
        (frames_with(request_ids=[1]), "request_ids, positions, query_lens and sample differ in length"),
        (frames_with(request_ids=[7, 7]), "request_ids repeat a request"),
        (frames_with(sample=[1, 0]), "sample must be a list of booleans"),
        (frames_with(token_ids=[1, 2]), "2 token_ids, query_lens add up to 6"),
        (frames_with(token_ids=[1, 2, 3, 4, 5, -6]), "token_ids must be a non-negative integer"),
        (frames_with(route=[1]), "route must be a list of at most 64 strings"),
        (frames_with(dtype="object"), "dtype 'object' is not one of"),
        (frames_with(shape=[6, 4]), "payload is 72 bytes, header describes 96"),
        (frames_with(shape=[2, 9]), r"activations of shape \[2, 9\] do not hold one row per fed token"),
        (frames_with(extra=1), "exceeds max_map_len"),
        ([msgpack.packb({"v": 3, "kind": "shutdown"}), b""], "header keys"),
        (frames_with(new_requests=[[7, 5]]), "a new request must be"),
        (frames_with(new_requests=sampled(1, -1.0)), "a new request's temperature must be a finite"),
        (frames_with(new_requests=sampled(1, float("nan"))), "temperature must be a finite non-negative"),
        (frames_with(new_requests=sampled(1, "hot")), "temperature must be a number"),
        (frames_with(new_requests=sampled(2, 0.0)), r"top_p must be a number in \(0, 1\]"),
        (frames_with(new_requests=sampled(2, 1.5)), r"top_p must be a number in \(0, 1\]"),
        (frames_with(new_requests=sampled(0, 0)), "max_tokens must be an integer of at least 1"),
        (frames_with(new_requests=sampled(3, 2**63)), "seed must be an integer from 0 to"),
        (frames_with(new_requests=sampled(4, list(range(17)))), "stop_token_ids must be a list of at most"),
        (frames_with(new_requests=sampled(4, [-1])), "stop_token_ids must be non-negative integers"),
        (frames_with(new_requests=[[7, 5, 16, 0.7, 0.9, 3, [2]]]), "a new request must be"),
        (frames_with(finished=[[4, 20]]), r"a finished request must be \[id, position, token\]"),
        (frames_with(preempted=["x"]), "preempted must be a non-negative integer"),
        (frames_with(epoch=[3]), r"epoch must be \[plan version, session\]"),
        # well-formed fields that once got past the checks and killed the stage's thread
        (frames_with(finished=[[4, 20, 11], [4, 20, 11]]), "finished repeats a request"),
        (frames_with(kind="tokens"), "tokens carry one token per request"),
        (frames_with(finished=[[7, 20, 11]]), "a request is both finished and fed"),
        (
            frames_with(query_lens=[6, 0], token_ids=[1, 2, 3, 4, 5, 6]),
            "feed every request at least one token",
        ),
        (frames_with(epoch=[3, 1, 2]), "epoch must be a list of at most 2 integers"),
        (frames_with(epoch=[3, -1]), "epoch must be a non-negative integer"),
    ],
)
def test_malformed_messages_are_rejected(frames: list[bytes], reason: str) -> None:
    with pytest.raises(FrameError, match=reason):
        decode(frames)


def test_truncated_and_oversized_messages() -> None:
    good = frames_with()
    with pytest.raises(FrameError, match="payload is 68 bytes, header describes 72"):
        decode([good[0], good[1][:-4]])
    with pytest.raises(FrameError, match="payload of 72 bytes exceeds 16"):
        decode(good, Limits(max_payload_bytes=16))
    with pytest.raises(FrameError, match=r"header of \d+ bytes exceeds 8"):
        decode(good, Limits(max_header_bytes=8))
    with pytest.raises(FrameError, match="header is not valid msgpack"):
        decode(frames_with(token_ids=[1] * 7, query_lens=[6, 1]), Limits(max_tokens=6, max_requests=6))


def test_encode_refuses_a_header_that_lies() -> None:
    header, tensor = activations(torch.zeros(6, 3))
    with pytest.raises(FrameError, match="do not describe the tensor"):
        encode(header, tensor.half())


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
@pytest.mark.parametrize("dtype", sorted(d for d in DTYPES if DTYPES[d].is_floating_point))
def test_non_finite_activations_are_rejected(bad: float, dtype: str) -> None:
    """A hostile or broken peer's NaN or infinity stops at the stage that receives it, however it is
    encoded."""
    tensor = torch.zeros(6, 3, dtype=torch.float32)
    tensor[4, 1] = bad
    tensor = tensor.to(DTYPES[dtype])
    header, _ = activations(tensor)
    with pytest.raises(FrameError, match="non-finite values"):
        decode(encode(header, tensor))


# Any msgpack value a peer could send as a header: nested maps and lists of scalars, bounded in size.
PACKABLE = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats()
    | st.text(max_size=16)
    | st.binary(max_size=16),
    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(st.text(max_size=12), inner, max_size=6),
    max_leaves=40,
)
GOOD_HEADER = encode(*activations(torch.ones(2, 4)))[0]


@given(
    header=st.one_of(
        st.binary(max_size=256),
        PACKABLE.map(msgpack.packb),
        st.dictionaries(st.sampled_from(sorted(msgpack.unpackb(GOOD_HEADER))), PACKABLE).map(
            lambda changes: msgpack.packb({**msgpack.unpackb(GOOD_HEADER), **changes})
        ),
    ),
    payload=st.binary(max_size=256),
)
def test_arbitrary_frames_are_decoded_or_refused_with_a_frame_error(header: bytes, payload: bytes) -> None:
    """Whatever a hostile peer sends, including a well-formed header with any field replaced by any value,
    `decode` returns a message or raises FrameError: nothing else escapes into the stage loop."""
    with contextlib.suppress(FrameError):
        decode([header, payload])
