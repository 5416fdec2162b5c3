"""The seed a line is sampled with (client_sdk/protocol/sampling.py): the request's own, else one derived from
the task and the custom_id, the same for every party and different across tasks and lines."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from client_sdk.protocol.constants import MAX_SEED
from client_sdk.protocol.sampling import line_seed


def test_a_requested_seed_is_used_as_it_is() -> None:
    assert line_seed(5, "a", 0) == 0
    assert line_seed(5, "a", MAX_SEED) == MAX_SEED


def test_the_derived_seed_matches_its_test_vector() -> None:
    # docs/sampling.md: SHA-256("batchmarket seed v1" || task id as 8 big-endian bytes || custom_id)
    assert line_seed(7, "request-1", None) == 0x6F4306CF10732266
    assert line_seed(0, "request-1", None) == 0x30AB74E9AB1BB25E


@given(task=st.integers(0, 2**31 - 1), custom_id=st.text(min_size=1, max_size=64))
def test_derived_seeds_fit_and_tell_tasks_and_lines_apart(task: int, custom_id: str) -> None:
    seed = line_seed(task, custom_id, None)
    assert 0 <= seed <= MAX_SEED
    assert seed == line_seed(task, custom_id, None)
    assert seed != line_seed(task + 1, custom_id, None)
    assert seed != line_seed(task, custom_id + "x", None)
