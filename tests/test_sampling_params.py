"""A request's sampling parameters (client_sdk/protocol/sampling.py), as stages send them: the wire form round
trips, and every field out of its range, of the wrong type, or a stop list over the limit is refused by name,
whoever builds the parameters (a stage decoding a peer's message, or a miner reading a batch line)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from client_sdk.protocol.constants import MAX_SEED
from client_sdk.protocol.sampling import SamplingParams

MAX_STOP = 16
PARAMS = st.builds(
    SamplingParams,
    max_tokens=st.integers(min_value=1, max_value=2**31),
    temperature=st.floats(min_value=0, max_value=4, allow_nan=False),
    top_p=st.floats(min_value=0, max_value=1, exclude_min=True),
    seed=st.integers(min_value=0, max_value=MAX_SEED),
    stop_token_ids=st.lists(st.integers(min_value=0, max_value=2**31), max_size=MAX_STOP).map(tuple),
)
BAD = {
    0: ("max_tokens", st.one_of(st.integers(max_value=0), st.floats(), st.text(), st.booleans())),
    1: (
        "temperature",
        st.one_of(st.floats(max_value=-1e-9), st.just(float("nan")), st.just(float("inf")), st.text()),
    ),
    2: ("top_p", st.one_of(st.floats(max_value=0), st.floats(min_value=1.0000001), st.none(), st.booleans())),
    3: ("seed", st.one_of(st.integers(max_value=-1), st.integers(min_value=MAX_SEED + 1), st.floats())),
    4: (
        "stop_token_ids",
        st.one_of(st.just([-1]), st.just(["x"]), st.just(list(range(MAX_STOP + 1))), st.text()),
    ),
}


@given(PARAMS)
def test_the_wire_form_round_trips(params: SamplingParams) -> None:
    assert SamplingParams.from_wire(params.to_wire(), MAX_STOP) == params


@given(PARAMS, st.sampled_from(sorted(BAD)), st.data())
def test_a_bad_field_is_refused_by_name(params: SamplingParams, index: int, data: st.DataObject) -> None:
    name, values = BAD[index]
    wire = params.to_wire()
    wire[index] = data.draw(values)
    with pytest.raises(ValueError, match=f"^{name} must be"):
        SamplingParams.from_wire(wire, MAX_STOP)


@pytest.mark.parametrize(
    "raw", [None, [], [16, 0.0, 1.0, 0], [16, 0.0, 1.0, 0, [], "extra"], {"max_tokens": 16}]
)
def test_a_malformed_list_is_refused(raw: object) -> None:
    with pytest.raises(ValueError, match=r"^sampling parameters must be \[max_tokens"):
        SamplingParams.from_wire(raw, MAX_STOP)


def test_building_checks_the_same_rules() -> None:
    with pytest.raises(ValueError, match=r"^seed must be"):
        SamplingParams(seed=MAX_SEED + 1)
    with pytest.raises(ValueError, match=r"^top_p must be"):
        SamplingParams(top_p=0)
    assert SamplingParams(max_tokens=3, stop_token_ids=(2,)).completed_by([5, 2])
