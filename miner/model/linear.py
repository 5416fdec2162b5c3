"""The matrix products of a layer with one checkpoint weight.

On CPU, a weight is packed once at load into oneDNN's blocked layout and multiplied by oneDNN: on the
shapes of decoding (tens of rows against a few thousand columns) that runs at 1.3 to 2 times the speed of
`F.linear` (measured on 2 AVX-512 cores: 200 against 98 to 155 GFLOP/s at 64 rows, and twice as fast for one
row; on 2 AVX2 cores, 130 against 70 to 130). Elsewhere, or where this torch build or CPU cannot pack the
dtype (bfloat16 needs AVX-512), it is `F.linear`. Both compute the same products; only the order of the float
additions inside a dot product differs.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def onednn_packs(dtype: torch.dtype) -> bool:
    """Whether this torch build and CPU can multiply by a oneDNN-packed weight of `dtype` (bfloat16 needs
    AVX-512 BF16 or AVX-512 BW support; an AVX2-only CPU packs only float32)."""
    available = torch.backends.mkldnn.is_available()  # type: ignore[no-untyped-call]  # unannotated in torch
    if not available or not hasattr(torch.ops.mkldnn, "_linear_pointwise"):
        return False
    if dtype == torch.float32:
        return True
    return dtype == torch.bfloat16 and bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


class Linear:
    """`x @ weight.T + bias` for a fixed weight [out_features, in_features]."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None = None) -> None:
        self.out_features = weight.shape[0]
        self.bias = bias
        packable = weight.device.type == "cpu" and onednn_packs(weight.dtype)
        # the packed copy replaces the weight
        self.weight = torch.ops.mkldnn._reorder_linear_weight(weight) if packable else weight
        self.packed = packable

    @property
    def nbytes(self) -> int:
        """Bytes of the weight (packed or not) and bias this product holds."""
        bias = self.bias.nbytes if self.bias is not None else 0
        return self.weight.numel() * self.weight.element_size() + bias

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if not self.packed:
            return F.linear(x, self.weight, self.bias)
        if x.shape[0] == 0:
            return x.new_empty(0, self.out_features)
        out: torch.Tensor = torch.ops.mkldnn._linear_pointwise(
            x.contiguous(), self.weight, self.bias, "none", [], ""
        )
        return out
