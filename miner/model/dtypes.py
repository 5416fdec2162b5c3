"""The torch dtype of each name in client_sdk.protocol.constants.STAGE_DTYPES."""

from __future__ import annotations

import torch

from client_sdk.protocol.constants import STAGE_DTYPES, stage_dtype

DTYPES: dict[str, torch.dtype] = {name: getattr(torch, name) for name in STAGE_DTYPES}


def dtype_named(name: str) -> torch.dtype:
    return DTYPES[stage_dtype(name)]
