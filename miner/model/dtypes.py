"""The dtypes a stage may run in, by the names the command lines and the stage specs use."""

from __future__ import annotations

import torch

from client_sdk.errors import UserError

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def dtype_named(name: str) -> torch.dtype:
    if name not in DTYPES:
        raise UserError(f"dtype must be one of {', '.join(DTYPES)}, not {name!r}")
    return DTYPES[name]
