"""One decoder layer (pre-norm attention + SwiGLU MLP) computed from checkpoint tensors."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from miner.attention.backend import AttentionBackend
from miner.model.config import ModelConfig
from miner.model.rope import rotate


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """Normalizes in float32 like the reference implementations, then scales in the model dtype."""
    x32 = x.float()
    normed = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)
    return weight * normed.to(x.dtype)


class DecoderLayer:
    def __init__(self, config: ModelConfig, weights: dict[str, torch.Tensor]) -> None:
        self.config = config
        self.w = weights

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
        q = F.linear(x, w["self_attn.q_proj.weight"], w.get("self_attn.q_proj.bias"))
        k = F.linear(x, w["self_attn.k_proj.weight"], w.get("self_attn.k_proj.bias"))
        v = F.linear(x, w["self_attn.v_proj.weight"], w.get("self_attn.v_proj.bias"))
        q = q.view(tokens, c.num_heads, c.head_dim)
        k = k.view(tokens, c.num_kv_heads, c.head_dim)
        v = v.view(tokens, c.num_kv_heads, c.head_dim)
        if c.qk_norm:
            q = rms_norm(q, w["self_attn.q_norm.weight"], c.rms_norm_eps)
            k = rms_norm(k, w["self_attn.k_norm.weight"], c.rms_norm_eps)
        q, k = rotate(q, *rotation), rotate(k, *rotation)
        attended = attention(q, k, v, key_cache, value_cache)
        hidden = hidden + F.linear(attended.reshape(tokens, -1), w["self_attn.o_proj.weight"])

        x = rms_norm(hidden, w["post_attention_layernorm.weight"], c.rms_norm_eps)
        gate = F.linear(x, w["mlp.gate_proj.weight"])
        up = F.linear(x, w["mlp.up_proj.weight"])
        return hidden + F.linear(F.silu(gate) * up, w["mlp.down_proj.weight"])
