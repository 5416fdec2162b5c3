"""Short chat questions for the benchmarks that run the real model, tokenized as `miner run-local` tokenizes a
chat line: the model's chat template (SmolLM2's adds its system prompt) with the assistant turn opened."""

from __future__ import annotations

import json

from client_sdk.openai_batch import CHAT, Tokenizer, parse_line, prompt_token_ids
from miner.model.packaged import SMOLLM2

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
    bodies = ({"model": SMOLLM2.name, "messages": [{"role": "user", "content": q}]} for q in QUESTIONS)
    rows = ({"custom_id": f"q{i}", "method": "POST", "url": CHAT, "body": b} for i, b in enumerate(bodies))
    return [prompt_token_ids(tokenizer, parse_line(json.dumps(row), n)) for n, row in enumerate(rows, 1)]
