import pytest
from hypothesis import given
from hypothesis import strategies as st

from client_sdk.errors import UserError
from client_sdk.units import format_amount, format_duration, parse_amount


@given(st.integers(min_value=0, max_value=10**30))
def test_format_then_parse_round_trips(base_units: int) -> None:
    assert parse_amount(format_amount(base_units)) == base_units


@pytest.mark.parametrize(
    ("text", "expected"),
    [("100", 100_000_000), ("0.5", 500_000), ("12.345678", 12_345_678), (" 7 ", 7_000_000)],
)
def test_parse_amount(text: str, expected: int) -> None:
    assert parse_amount(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("-1", "not a token amount: '-1'"),
        ("abc", "not a token amount: 'abc'"),
        ("nan", "not a token amount: 'nan'"),
        ("1.0000001", "1.0000001 has more than 6 decimals"),
    ],
)
def test_parse_amount_rejects(text: str, message: str) -> None:
    with pytest.raises(UserError) as caught:
        parse_amount(text)
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [(0, "0s"), (45, "45s"), (185, "3m 05s"), (7_800, "2h 10m"), (273_600, "3d 04h"), (-60, "1m 00s")],
)
def test_format_duration(seconds: int, expected: str) -> None:
    assert format_duration(seconds) == expected
