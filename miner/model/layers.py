"""One decoder layer (pre-norm attention + SwiGLU MLP) computed from checkpoint tensors.

The query, key and value projections run as one matrix product, and so do the MLP's gate and up projections
(their weights concatenated once at load): fewer, larger products use the cores better than many small ones.
Each product is a `Linear` (oneDNN with packed weights on CPU).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from miner.attention.interface import AttentionBackend
from miner.model.config import ModelConfig
from miner.model.linear import Linear
from miner.model.rope import rotate


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """Normalizes in float32 like the reference implementations, then scales in the model dtype."""
    x32 = x.float()
    normed = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)
    return weight * normed.to(x.dtype)


class DecoderLayer:
    def __init__(self, config: ModelConfig, weights: dict[str, torch.Tensor]) -> None:
        self.config = config
        fused = _fuse(weights)
        self.qkv = Linear(fused.pop("qkv.weight"), fused.pop("qkv.bias", None))
        self.o_proj = Linear(fused.pop("self_attn.o_proj.weight"))
        self.gate_up = Linear(fused.pop("gate_up.weight"))
        self.down_proj = Linear(fused.pop("mlp.down_proj.weight"))
        self.w = fused  # the norms' weights
        self.products = (self.qkv, self.o_proj, self.gate_up, self.down_proj)
        kv_width = config.num_kv_heads * config.head_dim
        self.qk_v_sizes = [config.num_heads * config.head_dim + kv_width, kv_width]

    def __call__(
        self,
        hidden: torch.Tensor,  # [tokens, hidden]
        rotation: tuple[torch.Tensor, torch.Tensor],  # cos, sin of the tokens' positions
        key_cache: torch.Tensor,
        value_cache: torch.Tensor,
        attention: AttentionBackend,  # planned for this step's batch
    ) -> torch.Tensor:
        c, w = self.config, self.w
        tokens = hidden.shape[0]
        x = rms_norm(hidden, w["input_layernorm.weight"], c.rms_norm_eps)
        heads, kv_heads = c.num_heads, c.num_kv_heads
        qk, v = self.qkv(x).split_with_sizes(self.qk_v_sizes, dim=-1)
        # queries and keys side by side [tokens, heads + kv_heads, head_dim]: rotated by one set of ops
        qk = qk.view(tokens, heads + kv_heads, c.head_dim)
        v = v.reshape(tokens, kv_heads, c.head_dim)
        if c.qk_norm:
            q = rms_norm(qk[:, :heads], w["self_attn.q_norm.weight"], c.rms_norm_eps)
            k = rms_norm(qk[:, heads:], w["self_attn.k_norm.weight"], c.rms_norm_eps)
            qk = torch.cat((q, k), dim=1)
        q, k = rotate(qk, *rotation).split_with_sizes((heads, kv_heads), dim=1)
        attended = attention(q, k, v, key_cache, value_cache)
        hidden = hidden + self.o_proj(attended.reshape(tokens, -1))

        x = rms_norm(hidden, w["post_attention_layernorm.weight"], c.rms_norm_eps)
        gate, up = self.gate_up(x).chunk(2, dim=-1)
        return hidden + self.down_proj(F.silu(gate) * up)


def _fuse(weights: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The layer's tensors with q, k, v (and their biases, when present) and gate, up concatenated."""
    fused = dict(weights)
    projections = [fused.pop(f"self_attn.{p}_proj.weight") for p in "qkv"]
    fused["qkv.weight"] = torch.cat(projections)
    biases = [fused.pop(f"self_attn.{p}_proj.bias", None) for p in "qkv"]
    if any(b is not None for b in biases):
        fused["qkv.bias"] = torch.cat(
            [
                b if b is not None else p.new_zeros(p.shape[0])
                for b, p in zip(biases, projections, strict=True)
            ]
        )
    fused["gate_up.weight"] = torch.cat([fused.pop("mlp.gate_proj.weight"), fused.pop("mlp.up_proj.weight")])
    return fused
