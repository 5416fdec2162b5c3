"""The wire format between stages: frame 1 is a msgpack header, frame 2 the raw bytes of one tensor.

Everything from a peer is checked before use: header size and shape, field types, list lengths, dtype, and
that the payload is exactly as long as the header says. Anything else raises FrameError with the reason, so a
stage can log and drop the message instead of dying.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import msgpack
import torch

PROTOCOL_VERSION = 1
KINDS = ("activations", "tokens")
DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "int64": torch.int64,
}
DTYPE_NAMES = {dtype: name for name, dtype in DTYPES.items()}
HEADER_KEYS = {"v", "kind", "microbatch", "request_ids", "positions", "query_lens", "route", "dtype", "shape"}


@dataclass(frozen=True)
class Limits:
    max_header_bytes: int = 64 * 1024
    max_payload_bytes: int = 256 * 1024 * 1024
    max_requests: int = 4096
    max_route: int = 64
    max_dims: int = 4


DEFAULT_LIMITS = Limits()


class FrameError(ValueError):
    """A message that does not follow the protocol; the reason says which rule it broke."""


@dataclass(frozen=True)
class Header:
    kind: str  # "activations" (hidden states forward) or "tokens" (sampled ids back to the first stage)
    microbatch: int
    request_ids: tuple[int, ...]
    positions: tuple[int, ...]  # first position of each request's tokens in this message
    query_lens: tuple[int, ...]  # tokens of each request in this message
    route: tuple[str, ...]  # stage endpoints of the pipeline, first stage first
    dtype: str
    shape: tuple[int, ...]

    def as_dict(self) -> dict[str, Any]:
        return {
            "v": PROTOCOL_VERSION,
            "kind": self.kind,
            "microbatch": self.microbatch,
            "request_ids": list(self.request_ids),
            "positions": list(self.positions),
            "query_lens": list(self.query_lens),
            "route": list(self.route),
            "dtype": self.dtype,
            "shape": list(self.shape),
        }


def encode(header: Header, tensor: torch.Tensor) -> list[bytes]:
    """The two frames of a message; the header's dtype and shape must describe `tensor`."""
    if DTYPE_NAMES.get(tensor.dtype) != header.dtype or tuple(tensor.shape) != header.shape:
        raise FrameError("header dtype/shape do not describe the tensor")
    payload = tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
    return [msgpack.packb(header.as_dict()), payload]


def decode(frames: list[bytes], limits: Limits = DEFAULT_LIMITS) -> tuple[Header, torch.Tensor]:
    """Checks and decodes a message received from a peer."""
    if len(frames) != 2:
        raise FrameError(f"expected 2 frames, got {len(frames)}")
    raw_header, payload = frames
    if len(raw_header) > limits.max_header_bytes:
        raise FrameError(f"header of {len(raw_header)} bytes exceeds {limits.max_header_bytes}")
    if len(payload) > limits.max_payload_bytes:
        raise FrameError(f"payload of {len(payload)} bytes exceeds {limits.max_payload_bytes}")
    try:
        fields = msgpack.unpackb(
            raw_header,
            raw=False,
            strict_map_key=True,
            max_array_len=limits.max_requests,
            max_map_len=16,
            max_str_len=1024,
            max_bin_len=0,
            max_ext_len=0,
        )
    except (ValueError, msgpack.UnpackException) as exc:
        raise FrameError(f"header is not valid msgpack: {exc}") from None
    header = _validate(fields, limits)
    itemsize = torch.empty((), dtype=DTYPES[header.dtype]).element_size()
    expected = math.prod(header.shape) * itemsize
    if len(payload) != expected:
        raise FrameError(f"payload is {len(payload)} bytes, header describes {expected}")
    data = (
        torch.frombuffer(bytearray(payload), dtype=torch.uint8)
        if payload
        else torch.empty(0, dtype=torch.uint8)
    )
    return header, data.view(DTYPES[header.dtype]).reshape(header.shape)


def _validate(fields: object, limits: Limits) -> Header:
    if not isinstance(fields, dict):
        raise FrameError("header is not a map")
    if set(fields) != HEADER_KEYS:
        raise FrameError(f"header keys {sorted(fields)} are not {sorted(HEADER_KEYS)}")
    if fields["v"] != PROTOCOL_VERSION:
        raise FrameError(f"protocol version {fields['v']!r} is not {PROTOCOL_VERSION}")
    if fields["kind"] not in KINDS:
        raise FrameError(f"kind {fields['kind']!r} is not one of {KINDS}")
    microbatch = _non_negative_int(fields["microbatch"], "microbatch")
    ids = _int_list(fields["request_ids"], "request_ids", limits.max_requests)
    positions = _int_list(fields["positions"], "positions", limits.max_requests)
    query_lens = _int_list(fields["query_lens"], "query_lens", limits.max_requests)
    if not len(ids) == len(positions) == len(query_lens):
        raise FrameError("request_ids, positions and query_lens differ in length")
    route = fields["route"]
    if (
        not isinstance(route, list)
        or len(route) > limits.max_route
        or not all(isinstance(r, str) for r in route)
    ):
        raise FrameError(f"route must be a list of at most {limits.max_route} strings")
    if fields["dtype"] not in DTYPES:
        raise FrameError(f"dtype {fields['dtype']!r} is not one of {sorted(DTYPES)}")
    shape = _int_list(fields["shape"], "shape", limits.max_dims)
    return Header(
        fields["kind"], microbatch, ids, positions, query_lens, tuple(route), fields["dtype"], shape
    )


def _non_negative_int(value: object, name: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise FrameError(f"{name} must be a non-negative integer")
    return value


def _int_list(value: object, name: str, max_len: int) -> tuple[int, ...]:
    if not isinstance(value, list) or len(value) > max_len:
        raise FrameError(f"{name} must be a list of at most {max_len} integers")
    return tuple(_non_negative_int(v, name) for v in value)
