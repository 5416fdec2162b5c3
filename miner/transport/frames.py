"""The wire format between pipeline processes: frame 1 is a msgpack header, frame 2 the raw bytes of one
tensor.

One schema serves every message kind:

- "submit" (driver -> first stage): new requests; `token_ids` holds each one's prompt, followed by the output
  tokens it already has when it is resumed (re-prefilled here after another pipeline lost it), `query_lens`
  their lengths, `new_requests` their sampling parameters and where each prompt ends (`prompt_len`).
- "activations" (stage -> next stage): one microbatch step. Per request: the tokens fed (`token_ids`, flat),
  where they start (`positions`, the tokens already cached), how many (`query_lens`) and whether its last
  logits pick its next token (`sample`). `new_requests` gives the prompt length and sampling parameters of
  requests fed from position 0 (the tokens after the prompt are output, a resumed request's included),
  `finished` and `preempted` the requests whose pages every stage frees before this step (a finished one with
  its last token, which no stage was fed). The payload is the hidden states.
- "tokens" (last stage -> first stage, closing the ring): the sampled token of each request, at `positions`.
- "completions" (first stage -> driver): finished requests' generated ids (`query_lens` long each).
- "shutdown": stop after forwarding it down the pipeline.

Every message carries its `epoch`, [plan version, head session]: the coordinator's plan version the head
serves, and a number the head draws anew (larger than before) whenever it starts over with an empty page pool
(a restart, a rebuilt stage, a stalled step). Activations pass it down the pipeline and tokens back to the
head, so every stage can tell a message of the session it serves from one of a session that ended (its
requests' pages are freed) or of a plan its node has not followed yet (kept until it does).

Everything from a peer is checked before use: header size and shape, field types and ranges, list lengths,
dtype, and that the payload is exactly as long as the header says. Anything else raises FrameError with the
reason, so a stage can log and drop the message instead of dying.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import msgpack
import torch

from client_sdk.protocol.fields import is_int
from client_sdk.protocol.sampling import SamplingParams
from miner.model.dtypes import DTYPES as STAGE_DTYPES

# 5: every message carries its epoch, [plan version, head session] (version 4 had none, so a stage could not
# tell a restarted head's requests from the ones it had in flight before); stages of a pipeline must agree,
# so a version-4 peer is refused.
PROTOCOL_VERSION = 5
KINDS = ("submit", "activations", "tokens", "completions", "shutdown")
DTYPES: dict[str, torch.dtype] = {**STAGE_DTYPES, "int64": torch.int64}  # activations, and token ids
DTYPE_NAMES = {dtype: name for name, dtype in DTYPES.items()}
HEADER_KEYS = {
    "v",
    "kind",
    "microbatch",
    "request_ids",
    "positions",
    "query_lens",
    "token_ids",
    "sample",
    "new_requests",
    "finished",
    "preempted",
    "route",
    "dtype",
    "shape",
    "epoch",
}


@dataclass(frozen=True)
class Limits:
    max_header_bytes: int = 4 * 1024 * 1024
    max_payload_bytes: int = 256 * 1024 * 1024
    max_requests: int = 4096
    max_tokens: int = 262_144  # token ids in one message
    max_stop_tokens: int = 16
    max_route: int = 64
    max_dims: int = 4

    @property
    def max_message_bytes(self) -> int:
        """The largest message (header and payload) a socket of a stage link takes."""
        return self.max_header_bytes + self.max_payload_bytes


DEFAULT_LIMITS = Limits()


class FrameError(ValueError):
    """A message that does not follow the protocol; the reason says which rule it broke."""


@dataclass(frozen=True)
class RequestSpec:
    """What stages need to know about a request besides its tokens: its id, its prompt's length and how it is
    sampled."""

    request_id: int
    prompt_len: int
    params: SamplingParams

    def as_list(self) -> list[Any]:
        return [self.request_id, self.prompt_len, self.params.to_wire()]


@dataclass(frozen=True)
class Finished:
    """A request that finished: its pages are freed, and its last token (at `position`) is recorded."""

    request_id: int
    position: int
    token: int


@dataclass(frozen=True)
class Header:
    kind: str
    microbatch: int
    request_ids: tuple[int, ...]
    positions: tuple[int, ...]
    query_lens: tuple[int, ...]
    token_ids: tuple[int, ...]  # sum(query_lens) ids, request after request
    sample: tuple[bool, ...]  # one per request
    new_requests: tuple[RequestSpec, ...]
    finished: tuple[Finished, ...]
    preempted: tuple[int, ...]
    route: tuple[str, ...]  # stage endpoints of the pipeline, first stage first
    dtype: str
    shape: tuple[int, ...]
    epoch: tuple[int, int] = (0, 0)  # (plan version, head session); ordered as a tuple

    def as_dict(self) -> dict[str, Any]:
        return {
            "v": PROTOCOL_VERSION,
            "kind": self.kind,
            "microbatch": self.microbatch,
            "request_ids": list(self.request_ids),
            "positions": list(self.positions),
            "query_lens": list(self.query_lens),
            "token_ids": list(self.token_ids),
            "sample": list(self.sample),
            "new_requests": [spec.as_list() for spec in self.new_requests],
            "finished": [[f.request_id, f.position, f.token] for f in self.finished],
            "preempted": list(self.preempted),
            "route": list(self.route),
            "dtype": self.dtype,
            "shape": list(self.shape),
            "epoch": list(self.epoch),
        }

    def token_runs(self) -> list[tuple[int, ...]]:
        """`token_ids` split per request."""
        runs, start = [], 0
        for count in self.query_lens:
            runs.append(self.token_ids[start : start + count])
            start += count
        return runs


EMPTY = torch.empty(0, dtype=torch.int64)


def message(
    kind: str,
    microbatch: int = 0,
    *,
    request_ids: tuple[int, ...] = (),
    positions: tuple[int, ...] | None = None,
    query_lens: tuple[int, ...] | None = None,
    token_ids: tuple[int, ...] = (),
    sample: tuple[bool, ...] | None = None,
    new_requests: tuple[RequestSpec, ...] = (),
    finished: tuple[Finished, ...] = (),
    preempted: tuple[int, ...] = (),
    route: tuple[str, ...] = (),
    tensor: torch.Tensor = EMPTY,
    epoch: tuple[int, int] = (0, 0),
) -> tuple[Header, torch.Tensor]:
    """A header describing `tensor`; per-request lists default to position 0, one token and no sampling."""
    n = len(request_ids)
    header = Header(
        kind,
        microbatch,
        request_ids,
        (0,) * n if positions is None else positions,
        (1,) * n if query_lens is None else query_lens,
        token_ids,
        (False,) * n if sample is None else sample,
        new_requests,
        finished,
        preempted,
        route,
        DTYPE_NAMES[tensor.dtype],
        tuple(tensor.shape),
        epoch,
    )
    return header, tensor


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
            max_array_len=max(limits.max_requests, limits.max_tokens),
            max_map_len=len(HEADER_KEYS),
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
    tensor = data.view(DTYPES[header.dtype]).reshape(header.shape)
    # a peer's NaN or infinity would poison every later stage's output while each stage looks healthy
    if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
        raise FrameError("the tensor holds non-finite values (NaN or infinity)")
    return header, tensor


def _validate(fields: object, limits: Limits) -> Header:
    if not isinstance(fields, dict):
        raise FrameError("header is not a map")
    if set(fields) != HEADER_KEYS:
        raise FrameError(f"header keys {sorted(fields)} are not {sorted(HEADER_KEYS)}")
    if fields["v"] != PROTOCOL_VERSION:
        raise FrameError(f"protocol version {fields['v']!r} is not {PROTOCOL_VERSION}")
    kind = fields["kind"]
    if kind not in KINDS:
        raise FrameError(f"kind {kind!r} is not one of {KINDS}")
    microbatch = _non_negative_int(fields["microbatch"], "microbatch")
    ids = _int_list(fields["request_ids"], "request_ids", limits.max_requests)
    positions = _int_list(fields["positions"], "positions", limits.max_requests)
    query_lens = _int_list(fields["query_lens"], "query_lens", limits.max_requests)
    sample = fields["sample"]
    if not isinstance(sample, list) or not all(isinstance(s, bool) for s in sample):
        raise FrameError("sample must be a list of booleans")
    if not len(ids) == len(positions) == len(query_lens) == len(sample):
        raise FrameError("request_ids, positions, query_lens and sample differ in length")
    if len(set(ids)) != len(ids):
        raise FrameError("request_ids repeat a request")
    token_ids = _int_list(fields["token_ids"], "token_ids", limits.max_tokens)
    if len(token_ids) != sum(query_lens):
        raise FrameError(f"{len(token_ids)} token_ids, query_lens add up to {sum(query_lens)}")
    new_requests = _list(fields["new_requests"], "new_requests", limits.max_requests)
    finished = _list(fields["finished"], "finished", limits.max_requests)
    route = fields["route"]
    if (
        not isinstance(route, list)
        or len(route) > limits.max_route
        or not all(isinstance(r, str) for r in route)
    ):
        raise FrameError(f"route must be a list of at most {limits.max_route} strings")
    if not isinstance(fields["dtype"], str) or fields["dtype"] not in DTYPES:
        raise FrameError(f"dtype {fields['dtype']!r} is not one of {sorted(DTYPES)}")
    shape = _int_list(fields["shape"], "shape", limits.max_dims)
    if kind == "activations" and (not shape or shape[0] != len(token_ids)):
        raise FrameError(f"activations of shape {list(shape)} do not hold one row per fed token")
    if kind == "activations" and 0 in query_lens:
        raise FrameError("activations feed every request at least one token")
    if kind == "tokens" and any(n != 1 for n in query_lens):
        raise FrameError("tokens carry one token per request")
    epoch = _int_list(fields["epoch"], "epoch", 2)
    if len(epoch) != 2:
        raise FrameError("epoch must be [plan version, session]")
    return Header(
        kind,
        microbatch,
        ids,
        positions,
        query_lens,
        token_ids,
        tuple(sample),
        tuple(_request_spec(raw, limits) for raw in new_requests),
        _finished_list(finished, ids),
        _int_list(fields["preempted"], "preempted", limits.max_requests),
        tuple(route),
        fields["dtype"],
        shape,
        (epoch[0], epoch[1]),
    )


def _request_spec(raw: object, limits: Limits) -> RequestSpec:
    if not isinstance(raw, list) or len(raw) != 3:
        raise FrameError("a new request must be [id, prompt_len, sampling parameters]")
    request_id, prompt_len, params = raw
    try:
        sampling = SamplingParams.from_wire(params, limits.max_stop_tokens)
    except ValueError as exc:
        raise FrameError(f"a new request's {exc}") from None
    return RequestSpec(
        _non_negative_int(request_id, "request id"), _non_negative_int(prompt_len, "prompt_len"), sampling
    )


def _finished_list(raw: list[object], fed: tuple[int, ...]) -> tuple[Finished, ...]:
    """The finished requests: each once, and none of them fed in the same message."""
    finished = tuple(_finished(item) for item in raw)
    ids = {f.request_id for f in finished}
    if len(ids) != len(finished):
        raise FrameError("finished repeats a request")
    if ids & set(fed):
        raise FrameError("a request is both finished and fed")
    return finished


def _finished(raw: object) -> Finished:
    if not isinstance(raw, list) or len(raw) != 3:
        raise FrameError("a finished request must be [id, position, token]")
    return Finished(*(_non_negative_int(v, "finished") for v in raw))


def _non_negative_int(value: object, name: str) -> int:
    if not is_int(value) or value < 0:
        raise FrameError(f"{name} must be a non-negative integer")
    return value


def _list(value: object, name: str, max_len: int) -> list[object]:
    if not isinstance(value, list) or len(value) > max_len:
        raise FrameError(f"{name} must be a list of at most {max_len} entries")
    return value


def _int_list(value: object, name: str, max_len: int) -> tuple[int, ...]:
    if not isinstance(value, list) or len(value) > max_len:
        raise FrameError(f"{name} must be a list of at most {max_len} integers")
    return tuple(_non_negative_int(v, name) for v in value)
