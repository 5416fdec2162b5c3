"""Short chat questions for the benchmarks that run the real model, tokenized as `miner run-local` tokenizes a
chat line: the model's chat template (SmolLM2's adds its system prompt) with the assistant turn opened."""

from __future__ import annotations

from client_sdk.openai_batch import Tokenizer, prompt_token_ids, read_batch
from miner.model.packaged import SMOLLM2
from tests.coordinator.helpers import chat_line, jsonl

TOPICS = (
    "France", "the moon", "photosynthesis", "the Roman Empire", "volcanoes", "jazz", "prime numbers",
    "the ocean", "bees", "electricity", "chess", "the internet", "rain", "coffee", "Mount Everest", "gravity",
)  # fmt: skip
QUESTIONS = tuple(
    form.format(topic)
    for form in (
        "What is the capital of {}?",
        "Tell me one fact about {}.",
        "Explain {} to a child in two sentences.",
        "Write a short poem about {}.",
    )
    for topic in TOPICS
)


def chat_prompts(tokenizer: Tokenizer) -> list[list[int]]:
    """Each of QUESTIONS as one user message, as the prompt token ids the model sees."""
    lines = [chat_line(f"q{i}", q, model=SMOLLM2.name) for i, q in enumerate(QUESTIONS)]
    parsed, problems = read_batch(jsonl(lines), max_lines=len(lines))
    assert not problems, problems
    return [prompt_token_ids(tokenizer, line) for line in parsed]
