"""A pipeline stage's slice of the model: layers [start, end), plus the embedding on the first stage and the
final norm and LM head on the last. Only those tensors are read from the checkpoint."""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F

from client_sdk.errors import UserError
from miner.attention.layout import BatchLayout
from miner.attention.registry import select_attention
from miner.kv.cache import KVShape, PagedKVCache
from miner.model.config import ModelConfig
from miner.model.layers import DecoderLayer, rms_norm
from miner.model.linear import Linear
from miner.model.rope import Rotary
from miner.model.weights import load_tensors

EMBED = "model.embed_tokens.weight"
NORM = "model.norm.weight"
HEAD = "lm_head.weight"


class StageShard:
    def __init__(
        self,
        config: ModelConfig,
        start: int,
        end: int,
        tensors: dict[str, torch.Tensor],
        device: torch.device,
        attention: str = "auto",
    ) -> None:
        self.config = config
        self.start, self.end = start, end
        self.is_first = start == 0
        self.is_last = end == config.num_layers
        self.device = device
        self.embedding = tensors.get(EMBED) if self.is_first else None
        self.norm = tensors.get(NORM)
        head = tensors.get(HEAD, tensors.get(EMBED)) if self.is_last else None
        self.head = Linear(head) if head is not None else None
        self.layers = [DecoderLayer(config, _layer_weights(tensors, index)) for index in range(start, end)]
        self.rotary = Rotary(config.rope, config.head_dim, device)
        self.attention = select_attention(
            attention, config.num_heads, config.num_kv_heads, config.head_dim, self.dtype, device
        )

    @property
    def kv_shape(self) -> KVShape:
        """What this stage's KV cache holds per token."""
        config = self.config
        return KVShape(self.end - self.start, config.num_kv_heads, config.head_dim, self.dtype, self.device)

    @classmethod
    def load(
        cls,
        checkpoint_dir: Path,
        start: int,
        end: int,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str = "cpu",
        attention: str = "auto",
    ) -> StageShard:
        """`attention`: "auto" (FlashInfer on CUDA when installed, else the reference), "reference" or
        "flashinfer"."""
        config = ModelConfig.load(checkpoint_dir)
        if not 0 <= start < end <= config.num_layers:
            raise UserError(
                f"layer range [{start}, {end}) is not inside the model's {config.num_layers} layers"
            )
        target = torch.device(device)
        last = end == config.num_layers

        def wanted(name: str) -> bool:
            if name.startswith("model.layers."):
                return start <= int(name.split(".")[2]) < end
            if name == EMBED:  # the head reuses it when embeddings are tied
                return start == 0 or (last and config.tie_word_embeddings)
            return last and name in (NORM, HEAD)

        tensors = load_tensors(checkpoint_dir, wanted, dtype, target)
        return cls(config, start, end, tensors, target, attention)

    @property
    def dtype(self) -> torch.dtype:
        return self.layers[0].w["input_layernorm.weight"].dtype

    @property
    def weight_bytes(self) -> int:
        """Bytes of the weights this stage holds: its dense tensors (the norms, the embedding) and the
        (packed) weights of its matrix products. A tied LM head packed for its product is a copy beside the
        embedding, counted twice because it is held twice."""
        dense = [t for layer in self.layers for t in layer.w.values()]
        dense += [t for t in (self.embedding, self.norm) if t is not None]
        products = [p for layer in self.layers for p in layer.products]
        products += [self.head] if self.head is not None else []
        # a tensor viewing another's storage (an unpacked tied head) is counted once
        storages = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in dense}
        for product in products:
            if product.packed or product.weight.untyped_storage().data_ptr() not in storages:
                storages[id(product)] = product.nbytes
        return sum(storages.values())

    def forward(self, inputs: torch.Tensor, layout: BatchLayout, cache: PagedKVCache) -> torch.Tensor:
        """Runs this stage on a flattened batch.

        Takes token ids [tokens] on the first stage, hidden states [tokens, hidden] elsewhere. Returns the
        logits of each sequence's last token [sequences, vocab] on the last stage, hidden states elsewhere.
        """
        hidden = F.embedding(inputs, self.embedding) if self.embedding is not None else inputs
        rotation = self.rotary.tables(layout.positions(self.device), self.dtype)
        self.attention.plan(layout)
        for local, layer in enumerate(self.layers):
            hidden = layer(hidden, rotation, cache.keys[local], cache.values[local], self.attention)
        if self.head is None:
            return hidden
        last = hidden[layout.last_token_indices(self.device)]
        assert self.norm is not None
        return self.head(rms_norm(last, self.norm, self.config.rms_norm_eps)).float()


def _layer_weights(tensors: dict[str, torch.Tensor], index: int) -> dict[str, torch.Tensor]:
    prefix = f"model.layers.{index}."
    return {name[len(prefix) :]: t for name, t in tensors.items() if name.startswith(prefix)}
