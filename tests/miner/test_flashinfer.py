"""The FlashInfer backend on a CUDA GPU: equal to dense attention and to the reference backend on random
paged inputs (prefill chunks after cached prefixes, decode steps, grouped-query heads), and the engine's
greedy output checked against Hugging Face. Skipped where there is no CUDA device or no `gpu` extra."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import AutoConfig, AutoModelForCausalLM

from client_sdk.protocol.sampling import SamplingParams
from miner.attention.reference import ReferenceAttention
from miner.attention.registry import flashinfer_installed, select_attention
from miner.engine.engine import Engine
from miner.model.shard import StageShard
from tests.miner.attention_inputs import PagedInputs, dense_attention, random_paged_inputs

pytestmark = pytest.mark.skipif(
    not (torch.cuda.is_available() and flashinfer_installed()),
    reason="FlashInfer tests need a CUDA GPU and the gpu extra (pip install '.[gpu]')",
)
CUDA = torch.device("cuda")
HEADS = [(4, 4), (8, 2), (32, 8), (28, 4)]  # plain attention, then query/KV head ratios 4, 4 and 7
# (context lengths, new tokens) per sequence
DECODE = ([0, 15, 16, 17, 200], [1, 1, 1, 1, 1])
PREFILL = ([0, 0, 0], [1, 37, 130])
MIXED = ([0, 33, 9, 250, 64], [20, 1, 7, 1, 16])  # chunks after cached prefixes beside decoding sequences


def run_backend(backend_name: str, inputs: PagedInputs, heads: tuple[int, int], dtype: torch.dtype):
    backend = select_attention(backend_name, *heads, inputs.q.shape[-1], dtype, CUDA)
    key_cache, value_cache = inputs.key_cache.clone(), inputs.value_cache.clone()
    backend.plan(inputs.layout)
    out = backend(inputs.q, inputs.k, inputs.v, key_cache, value_cache)
    return backend, out, key_cache, value_cache


# each (dtype, head_dim) pair is a kernel FlashInfer may compile on first use, so the grid stays small
@pytest.mark.parametrize(
    ("dtype", "head_dim"), [(torch.bfloat16, 64), (torch.bfloat16, 128), (torch.float16, 128)]
)
@pytest.mark.parametrize("heads", HEADS)
@pytest.mark.parametrize("batch", [DECODE, PREFILL, MIXED], ids=["decode", "prefill", "mixed"])
@pytest.mark.parametrize("page_size", [1, 16])
def test_flashinfer_equals_dense_and_reference_attention(
    dtype: torch.dtype,
    head_dim: int,
    heads: tuple[int, int],
    batch: tuple[list[int], list[int]],
    page_size: int,
) -> None:
    inputs = random_paged_inputs(
        *batch, page_size, *heads, head_dim, seed=page_size, dtype=dtype, device=CUDA
    )
    expected = dense_attention(inputs)
    flash, out, key_cache, value_cache = run_backend("flashinfer", inputs, heads, dtype)
    _, reference, ref_keys, ref_values = run_backend("reference", inputs, heads, dtype)
    assert flash.name == "flashinfer"
    assert out.shape == inputs.q.shape and out.dtype == dtype
    tolerance = {"rtol": 2e-2, "atol": 2e-2} if dtype == torch.bfloat16 else {"rtol": 5e-3, "atol": 5e-3}
    torch.testing.assert_close(out.double(), expected, **tolerance)
    torch.testing.assert_close(out, reference, **tolerance)
    # both backends wrote the new keys and values to the same slots
    assert torch.equal(key_cache, ref_keys) and torch.equal(value_cache, ref_values)


def test_auto_picks_flashinfer_in_half_precision_and_the_reference_in_float32() -> None:
    assert select_attention("auto", 8, 2, 64, torch.bfloat16, CUDA).name == "flashinfer"
    assert isinstance(select_attention("auto", 8, 2, 64, torch.float32, CUDA), ReferenceAttention)


# FlashInfer's kernels take head dimensions like 64 and 128: these checkpoints are wider than the CPU ones.
MODEL = {
    "vocab_size": 256,
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "max_position_embeddings": 512,
    "initializer_range": 0.15,  # varied continuations (the default 0.02 repeats one token)
    "rms_norm_eps": 1e-6,
}
PROMPTS = [[5, 17, 99, 3, 42, 8, 77], [1, 2], [100, 64, 32, 16, 8, 4, 2, 1, 9, 27, 81, 11, 13], [7] * 40]
NEW_TOKENS = [30, 5, 19, 24]
# bfloat16 keeps 8 bits of mantissa: a claimed token may trail the float32 argmax by this much logit.
LOGIT_GAP = 0.5


@pytest.fixture(scope="module", params=["llama", "qwen3"])
def checkpoint(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(AutoConfig.for_model(request.param, **MODEL))
    directory = tmp_path_factory.mktemp(request.param)
    model.save_pretrained(directory, safe_serialization=True)
    return directory


def engine_greedy(checkpoint: Path, dtype: torch.dtype, attention: str) -> list[list[int]]:
    shards = [StageShard.load(checkpoint, s, e, dtype, CUDA, attention) for s, e in [(0, 2), (2, 4)]]
    assert all(shard.attention.name == attention for shard in shards)
    engine = Engine(shards, page_size=16, local_pages=32, max_seqs=4, token_budget=24)
    return engine.generate(PROMPTS, [SamplingParams(max_tokens=n) for n in NEW_TOKENS])


def test_engine_with_the_reference_backend_on_cuda_equals_transformers_in_float32(checkpoint: Path) -> None:
    model = AutoModelForCausalLM.from_pretrained(checkpoint, dtype=torch.float32).to(CUDA)
    expected = []
    for prompt, new in zip(PROMPTS, NEW_TOKENS, strict=True):
        out = model.generate(
            torch.tensor([prompt], device=CUDA),
            max_new_tokens=new,
            do_sample=False,
            eos_token_id=None,
            pad_token_id=0,
        )
        expected.append(out[0, len(prompt) :].tolist())
    assert engine_greedy(checkpoint, torch.float32, "reference") == expected


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_engine_with_flashinfer_is_greedy_under_transformers_float32(
    checkpoint: Path, dtype: torch.dtype
) -> None:
    """Half precision cannot reproduce float32 bit for bit, so each claimed token is checked the way a
    verifier checks one: teacher-forced through transformers in float32, it is the argmax or within LOGIT_GAP
    of it."""
    outputs = engine_greedy(checkpoint, dtype, "flashinfer")
    assert [len(o) for o in outputs] == NEW_TOKENS
    assert len({tuple(o[:5]) for o in outputs}) > 1, (
        "degenerate checkpoint: every prompt gives the same output"
    )
    model = AutoModelForCausalLM.from_pretrained(checkpoint, dtype=torch.float32).to(CUDA)
    for prompt, output in zip(PROMPTS, outputs, strict=True):
        with torch.inference_mode():
            logits = model(torch.tensor([prompt + output], device=CUDA)).logits[0, len(prompt) - 1 : -1]
        claimed = logits.gather(1, torch.tensor(output, device=CUDA)[:, None])[:, 0]
        gaps = logits.max(-1).values - claimed
        assert float(gaps.max()) <= LOGIT_GAP, f"token {int(gaps.argmax())} trails the argmax by {gaps.max()}"
