"""A layer's matrix product gives `x @ weight.T + bias` in every dtype a stage can run, whether this CPU can
pack the weight for oneDNN or not (bfloat16 packing needs AVX-512; without it the product falls back)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from miner.model.linear import Linear, onednn_packs

TOLERANCE = {torch.float32: 1e-5, torch.bfloat16: 3e-2, torch.float16: 3e-3}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("rows", [0, 1, 7, 64])
def test_the_product_matches_f_linear(dtype: torch.dtype, rows: int) -> None:
    generator = torch.Generator().manual_seed(rows)
    weight = torch.randn(48, 32, generator=generator).to(dtype)
    bias = torch.randn(48, generator=generator).to(dtype)
    x = torch.randn(rows, 32, generator=generator).to(dtype)
    product = Linear(weight.clone(), bias)
    assert product.packed == onednn_packs(dtype)
    out = product(x)
    assert out.shape == (rows, 48) and out.dtype == dtype
    expected = F.linear(x.float(), weight.float(), bias.float())
    assert torch.allclose(out.float(), expected, atol=TOLERANCE[dtype] * 32, rtol=TOLERANCE[dtype])


def test_float16_is_never_packed() -> None:
    assert not onednn_packs(torch.float16)
