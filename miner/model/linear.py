"""The matrix products of a layer with one checkpoint weight.

On CPU, a weight is packed once at load into oneDNN's blocked layout and multiplied by oneDNN: on the
shapes of decoding (tens of rows against a few thousand columns) that runs at 1.3 to 2 times the speed of
`F.linear` (measured on 2 AVX-512 cores: 200 against 98 to 155 GFLOP/s at 64 rows, and twice as fast for one
row). Elsewhere, or where this torch build has no oneDNN, it is `F.linear`. Both compute the same products;
only the order of the float additions inside a dot product differs.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

PACKABLE_DTYPES = (torch.float32, torch.bfloat16)


def onednn_available() -> bool:
    available = torch.backends.mkldnn.is_available()  # type: ignore[no-untyped-call]  # unannotated in torch
    return bool(available) and hasattr(torch.ops.mkldnn, "_linear_pointwise")


class Linear:
    """`x @ weight.T + bias` for a fixed weight [out_features, in_features]."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None = None) -> None:
        self.out_features = weight.shape[0]
        self.bias = bias
        packable = weight.device.type == "cpu" and weight.dtype in PACKABLE_DTYPES and onednn_available()
        # the packed copy replaces the weight
        self.weight = torch.ops.mkldnn._reorder_linear_weight(weight) if packable else weight
        self.packed = packable

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if not self.packed:
            return F.linear(x, self.weight, self.bias)
        if x.shape[0] == 0:
            return x.new_empty(0, self.out_features)
        out: torch.Tensor = torch.ops.mkldnn._linear_pointwise(
            x.contiguous(), self.weight, self.bias, "none", [], ""
        )
        return out
