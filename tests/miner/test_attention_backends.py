"""The attention backend interface on CPU: the reference backend against plain dense attention, the batch
layout's positions and slots, FlashInfer's CSR page table (pure), and the choice of backend per device."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from client_sdk.errors import UserError
from miner.attention.layout import BatchLayout
from miner.attention.page_table import PageTable, page_table
from miner.attention.reference import ReferenceAttention
from miner.attention.registry import flashinfer_installed, select_attention
from tests.miner.attention_inputs import dense_attention, random_paged_inputs

CPU = torch.device("cpu")


def test_page_table_of_a_hand_built_batch() -> None:
    # pages of 4 tokens: a 6-token prefill chunk after 3 cached tokens (9 tokens: 3 pages, the last with 1),
    # a decode step at position 8 (9 tokens; its spare fourth page is left out), a fresh 4-token prompt
    layout = BatchLayout(
        context_lens=(3, 8, 0),
        query_lens=(6, 1, 4),
        block_tables=((7, 2, 5), (0, 1, 3, 9), (4,)),
        page_size=4,
    )
    assert page_table(layout) == PageTable(
        qo_indptr=(0, 6, 7, 11),
        kv_indptr=(0, 3, 6, 7),
        kv_indices=(7, 2, 5, 0, 1, 3, 4),
        kv_last_page_len=(1, 1, 4),
    )


def test_page_table_rejects_a_block_table_too_short_for_its_tokens() -> None:
    layout = BatchLayout(context_lens=(4,), query_lens=(1,), block_tables=((3,),), page_size=4)
    with pytest.raises(ValueError, match="sequence 0 has 5 tokens but its block table only 1 pages"):
        page_table(layout)


@st.composite
def layouts(draw: st.DrawFn) -> BatchLayout:
    page_size = draw(st.integers(1, 8))
    count = draw(st.integers(1, 6))
    context = draw(st.lists(st.integers(0, 40), min_size=count, max_size=count))
    query = draw(st.lists(st.integers(1, 12), min_size=count, max_size=count))
    tables = []
    for c, q in zip(context, query, strict=True):
        pages = -(-(c + q) // page_size) + draw(st.integers(0, 2))  # sometimes spare pages reserved
        tables.append(tuple(draw(st.lists(st.integers(0, 500), min_size=pages, max_size=pages, unique=True))))
    return BatchLayout(tuple(context), tuple(query), tuple(tables), page_size)


def slot(layout: BatchLayout, seq: int, position: int) -> int:
    return (
        layout.block_tables[seq][position // layout.page_size] * layout.page_size
        + position % layout.page_size
    )


@settings(max_examples=200, deadline=None)
@given(layouts())
def test_page_table_lists_exactly_the_pages_holding_each_sequence(layout: BatchLayout) -> None:
    table = page_table(layout)
    for seq, (query, kv_len) in enumerate(zip(layout.query_lens, layout.kv_lens, strict=True)):
        assert table.qo_indptr[seq + 1] - table.qo_indptr[seq] == query
        pages = table.kv_indices[table.kv_indptr[seq] : table.kv_indptr[seq + 1]]
        assert 1 <= table.kv_last_page_len[seq] <= layout.page_size
        assert (len(pages) - 1) * layout.page_size + table.kv_last_page_len[seq] == kv_len
        # token p of the sequence lives in pages[p // page_size], as its block table says
        assert pages == layout.block_tables[seq][: len(pages)]
    assert table.qo_indptr[-1] == layout.num_tokens
    assert table.kv_indptr[-1] == len(table.kv_indices)


@settings(max_examples=100, deadline=None)
@given(layouts())
def test_layout_positions_and_slots_follow_the_block_tables(layout: BatchLayout) -> None:
    expected_positions, expected_slots, expected_last = [], [], []
    for seq, (context, query) in enumerate(zip(layout.context_lens, layout.query_lens, strict=True)):
        expected_positions += range(context, context + query)
        expected_slots += [slot(layout, seq, p) for p in range(context, context + query)]
        expected_last.append(len(expected_positions) - 1)
    assert layout.positions(CPU).tolist() == expected_positions
    assert layout.slots(CPU).tolist() == expected_slots
    assert layout.last_token_indices(CPU).tolist() == expected_last


@settings(max_examples=40, deadline=None)
@given(
    batch=st.lists(st.tuples(st.integers(0, 30), st.sampled_from([1, 1, 2, 5, 13])), min_size=1, max_size=5),
    page_size=st.sampled_from([1, 4, 16]),
    heads=st.sampled_from([(4, 4), (4, 2), (6, 2), (8, 1)]),  # plain, then grouped-query attention
    seed=st.integers(0, 2**16),
)
def test_reference_backend_equals_dense_attention(
    batch: list[tuple[int, int]], page_size: int, heads: tuple[int, int], seed: int
) -> None:
    """Mixed steps (decoding sequences beside prefill chunks after cached prefixes), scattered pages."""
    contexts, queries = [c for c, _ in batch], [q for _, q in batch]
    inputs = random_paged_inputs(contexts, queries, page_size, *heads, head_dim=8, seed=seed)
    expected = dense_attention(inputs)
    backend = ReferenceAttention(*heads, head_dim=8, dtype=torch.float32, device=CPU)
    backend.plan(inputs.layout)
    out = backend(inputs.q, inputs.k, inputs.v, inputs.key_cache, inputs.value_cache)
    torch.testing.assert_close(out.double(), expected, rtol=1e-5, atol=1e-5)
    # the new keys and values were written to their slots
    slots = inputs.layout.slots(CPU)
    assert torch.equal(inputs.key_cache.view(-1, heads[1], 8)[slots], inputs.k)
    assert torch.equal(inputs.value_cache.view(-1, heads[1], 8)[slots], inputs.v)


def test_a_layer_before_plan_is_an_error() -> None:
    inputs = random_paged_inputs([0], [2], 4, 2, 2, head_dim=8, seed=0)
    with pytest.raises(RuntimeError, match="plan"):
        ReferenceAttention(2, 2, 8, torch.float32, CPU)(
            inputs.q, inputs.k, inputs.v, inputs.key_cache, inputs.value_cache
        )


@pytest.mark.parametrize("choice", ["auto", "reference"])
def test_cpu_stages_use_the_reference_backend(choice: str) -> None:
    backend = select_attention(choice, 4, 2, 16, torch.float32, CPU)
    assert isinstance(backend, ReferenceAttention)


def test_forcing_flashinfer_on_cpu_says_why_it_cannot_run() -> None:
    with pytest.raises(
        UserError, match="flashinfer attention backend cannot run here: it needs a CUDA device"
    ):
        select_attention("flashinfer", 4, 2, 16, torch.bfloat16, CPU)


@pytest.mark.parametrize(
    ("head_dim", "dtype", "reason"),
    [
        (64, torch.float32, "it supports float16 and bfloat16, the stage runs in torch.float32"),
        (16, torch.bfloat16, "it supports head_dim 64, 128, 256, the model has 16"),
    ],
)
def test_forcing_flashinfer_where_its_kernels_do_not_apply_says_why(
    head_dim: int, dtype: torch.dtype, reason: str
) -> None:
    # a CUDA device object can be named without a GPU; the checks refuse before anything runs on it
    with pytest.raises(UserError, match=reason):
        select_attention("flashinfer", 4, 2, head_dim, dtype, torch.device("cuda"))


@pytest.mark.skipif(flashinfer_installed(), reason="checks the message shown when flashinfer is missing")
def test_forcing_flashinfer_without_the_gpu_extra_says_how_to_install_it() -> None:
    with pytest.raises(UserError, match=r"flashinfer package is not installed \(pip install '\.\[gpu\]'\)"):
        select_attention("flashinfer", 4, 2, 64, torch.bfloat16, torch.device("cuda"))


def test_unknown_backend_is_refused() -> None:
    with pytest.raises(UserError, match="attention backend 'flash' is unknown"):
        select_attention("flash", 4, 2, 16, torch.float32, CPU)
