"""The real model, SmolLM2-135M-Instruct, made from its package on the registry (miner.model.packaged): the
checkpoint is the pinned one; prompts are built with the chat template and stop tokens exactly as transformers
builds them; over 2 pipeline stages with the KV cache offloaded, greedy chat and completion lines equal
transformers `generate` in float32 token for token, stopping where it stops, and their text is the
tokenizer's decoding of those tokens."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from transformers import AutoModelForCausalLM
from typer.testing import CliRunner

from client_sdk import openai_batch
from client_sdk.protocol.model_identity import model_hash
from miner.cli.app import app
from miner.model.packaged import SMOLLM2
from miner.pipeline.batch import load_tokenizer, stop_token_ids


def chat(custom_id: str, messages: list[dict[str, str]], max_tokens: int) -> dict[str, Any]:
    body = {"model": SMOLLM2.name, "messages": messages, "max_tokens": max_tokens, "temperature": 0}
    return {"custom_id": custom_id, "method": "POST", "url": openai_batch.CHAT, "body": body}


def completion(custom_id: str, prompt: str, max_tokens: int) -> dict[str, Any]:
    body = {"model": SMOLLM2.name, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0}
    return {"custom_id": custom_id, "method": "POST", "url": openai_batch.COMPLETIONS, "body": body}


def user(content: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": content}]


LINES = [
    chat("france", user("What is the capital of France?"), 24),  # stops early: "... is Paris."
    chat("sum", user("What is 12 plus 30? Answer with the number."), 16),
    chat("system", [{"role": "system", "content": "You answer in one word."}, *user("Sky colour?")], 12),
    completion("colors", "The three primary colors are", 20),  # runs to max_tokens
    completion("code", "def fibonacci(n):\n", 32),
]


@pytest.fixture(scope="module")
def tokenizer(real_model: Path) -> Any:
    return load_tokenizer(real_model)


def parsed(line: dict[str, Any]) -> openai_batch.BatchLine:
    return openai_batch.parse_line(json.dumps(line), 1)


def test_the_checkpoint_is_the_pinned_model(real_model: Path) -> None:
    assert "0x" + model_hash(real_model).hex() == SMOLLM2.model_hash


def test_prompts_and_stops_are_built_as_transformers_builds_them(real_model: Path, tokenizer: Any) -> None:
    for line in LINES:
        body = line["body"]
        if line["url"] == openai_batch.CHAT:
            text = tokenizer.apply_chat_template(body["messages"], tokenize=False, add_generation_prompt=True)
            assert text.endswith("<|im_start|>assistant\n")
            expected = tokenizer(text, add_special_tokens=False)["input_ids"]
        else:
            expected = tokenizer(body["prompt"])["input_ids"]
        assert openai_batch.prompt_token_ids(tokenizer, parsed(line)) == expected, line["custom_id"]
    assert stop_token_ids(tokenizer, real_model) == (tokenizer.convert_tokens_to_ids("<|im_end|>"),)


def hf_generate(real_model: Path, tokenizer: Any, stops: tuple[int, ...]) -> dict[str, list[int]]:
    """transformers' greedy output per line, one prompt at a time, stopping at the model's stop tokens."""
    model = AutoModelForCausalLM.from_pretrained(real_model, dtype=torch.float32)
    outputs = {}
    for line in LINES:
        prompt = openai_batch.prompt_token_ids(tokenizer, parsed(line))
        out = model.generate(
            torch.tensor([prompt]),
            max_new_tokens=line["body"]["max_tokens"],
            do_sample=False,
            eos_token_id=list(stops),
            pad_token_id=stops[0],
        )
        outputs[line["custom_id"]] = out[0, len(prompt) :].tolist()
    return outputs


def test_two_offloaded_stages_equal_transformers_generate(
    real_model: Path, tokenizer: Any, tmp_path: Path
) -> None:
    batch, output = tmp_path / "batch.jsonl", tmp_path / "out.jsonl"
    batch.write_text("".join(json.dumps(line) + "\n" for line in LINES))
    options = ["--stages", "2", "--microbatches", "2", "--offload"]
    args = ["run-local", "--model-dir", str(real_model), "--input", str(batch), "--output", str(output)]
    result = CliRunner().invoke(app, [*args, *options])
    assert result.exit_code == 0, result.output
    stops = stop_token_ids(tokenizer, real_model)
    expected = hf_generate(real_model, tokenizer, stops)
    results = {r["custom_id"]: r for r in map(json.loads, output.read_text().splitlines())}
    assert sorted(results) == sorted(expected)
    for custom_id, reference in expected.items():
        body = results[custom_id]["response"]["body"]
        choice = body["choices"][0]
        assert choice["token_ids"] == reference, custom_id
        text = choice["message"]["content"] if body["object"] == "chat.completion" else choice["text"]
        assert text == tokenizer.decode(reference, skip_special_tokens=True), custom_id
        assert choice["finish_reason"] == ("stop" if reference[-1] in stops else "length"), custom_id
    assert "Paris" in results["france"]["response"]["body"]["choices"][0]["message"]["content"]
    assert results["france"]["response"]["body"]["choices"][0]["finish_reason"] == "stop"
    assert results["colors"]["response"]["body"]["choices"][0]["finish_reason"] == "length"
