"""The dtype names every miner command takes, and the one error for any other."""

from __future__ import annotations

import pytest
import torch

from client_sdk.errors import UserError
from miner.model.dtypes import dtype_named


def test_dtype_names() -> None:
    assert [dtype_named(n) for n in ("float32", "float16", "bfloat16")] == [
        torch.float32,
        torch.float16,
        torch.bfloat16,
    ]
    with pytest.raises(UserError, match=r"^dtype must be one of float32, float16, bfloat16, not 'float64'$"):
        dtype_named("float64")
