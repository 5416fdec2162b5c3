"""The ingest's batched token counts (chat templates rendered together, then the Rust tokenizer asked for the
lengths beside the hashing) equal the length of the prompt a miner renders line by line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import select
from transformers import AutoTokenizer

from client_sdk.openai_batch import CHAT, COMPLETIONS, ROLES, BatchLine, parse_line, prompt_token_ids
from coordinator.config import Settings
from coordinator.db.models import Request
from coordinator.db.session import Database
from coordinator.services import files
from miner.tiny_checkpoint import SPECIAL_TOKENS, build_tokenizer
from tests.coordinator.conftest import ALICE
from tests.coordinator.helpers import chat_line, jsonl

TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=30)
# user text may hold the template's own control tokens
CONTENT = st.lists(TEXT | st.sampled_from(SPECIAL_TOKENS), max_size=4).map("".join)
MESSAGES = st.lists(
    st.fixed_dictionaries({"role": st.sampled_from(ROLES), "content": CONTENT}), min_size=1, max_size=3
)
PROMPT = CONTENT.filter(bool) | st.lists(st.integers(min_value=0), min_size=1, max_size=8)


def batch_lines(url: str, contents: list[Any]) -> list[BatchLine]:
    field = "messages" if url == CHAT else "prompt"
    rows = [
        {"custom_id": f"r{i}", "method": "POST", "url": url, "body": {"model": "m", field: content}}
        for i, content in enumerate(contents)
    ]
    return [parse_line(json.dumps(row), number) for number, row in enumerate(rows, start=1)]


FILES = st.one_of(
    st.lists(MESSAGES, min_size=1, max_size=6).map(lambda m: batch_lines(CHAT, m)),
    st.lists(PROMPT, min_size=1, max_size=6).map(lambda p: batch_lines(COMPLETIONS, p)),
)


class WithoutRustBackend:
    """The same tokenizer, seen as one with no Rust backend (a sentencepiece or pure-Python tokenizer)."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.tokenizer(*args, **kwargs)

    def apply_chat_template(self, *args: Any, **kwargs: Any) -> Any:
        return self.tokenizer.apply_chat_template(*args, **kwargs)


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("tokenizer")
    build_tokenizer(directory)
    return directory


@pytest.fixture(scope="module")
def tokenizer(tokenizer_dir: Path) -> Any:
    return AutoTokenizer.from_pretrained(tokenizer_dir)


@given(FILES)
def test_batched_counts_are_the_per_line_prompt_lengths(tokenizer: Any, lines: list[BatchLine]) -> None:
    expected = [len(prompt_token_ids(tokenizer, line)) for line in lines]
    assert files.count_prompt_tokens(tokenizer, lines) == expected
    assert files.count_prompt_tokens(WithoutRustBackend(tokenizer), lines) == expected


def test_truncation_or_padding_set_on_the_rust_backend_does_not_change_counts(tokenizer_dir: Path) -> None:
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)  # its own, since this changes its backend
    lines = batch_lines(CHAT, [[{"role": "user", "content": "word " * n}] for n in (1, 9, 30)])
    tokenizer.backend_tokenizer.enable_truncation(max_length=4)
    tokenizer.backend_tokenizer.enable_padding(length=64)
    counts = files.count_prompt_tokens(tokenizer, lines)
    assert counts == [len(prompt_token_ids(tokenizer, line)) for line in lines]


def test_ingest_stores_each_lines_own_token_count(settings: Settings) -> None:
    data = jsonl([chat_line(f"r{i}", "how many words? " * i) for i in range(7)])
    database = Database(settings.database_url)
    with database.session() as session:
        record = files.ingest_batch_file(session, settings, ALICE.address, "in.jsonl", data, 0)
        query = select(Request.prompt_tokens).where(Request.file_id == record.id).order_by(Request.line_index)
        stored = list(session.scalars(query))
    database.dispose()
    tokenizer = AutoTokenizer.from_pretrained(settings.models[0].path)
    rows = data.decode().splitlines()
    expected = [len(prompt_token_ids(tokenizer, parse_line(row, i + 1))) for i, row in enumerate(rows)]
    assert stored == expected
    assert record.input_tokens == sum(expected)
