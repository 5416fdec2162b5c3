"""`miner run-local` end to end on a tiny checkpoint built like the README says: every custom_id comes back
exactly once, outputs equal a direct in-process Engine run, and bad input gets a one-line error."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from client_sdk import openai_batch
from client_sdk.protocol.sampling import LOCAL_TASK_ID
from miner.cli.app import app
from miner.engine.engine import Engine
from miner.model.config import ModelConfig
from miner.model.shard import StageShard
from miner.pipeline.batch import load_tokenizer, prepare, stop_token_ids
from miner.tiny_checkpoint import build_checkpoint, build_tiny_model
from tests.helpers import usage_error


def chat(custom_id: str, content: str, **body: Any) -> dict[str, Any]:
    messages = [{"role": "user", "content": content}]
    return {
        "custom_id": custom_id,
        "method": "POST",
        "url": openai_batch.CHAT,
        "body": {"model": "tiny", "messages": messages, **body},
    }


def completion(custom_id: str, prompt: Any, **body: Any) -> dict[str, Any]:
    return {
        "custom_id": custom_id,
        "method": "POST",
        "url": openai_batch.COMPLETIONS,
        "body": {"model": "tiny", "prompt": prompt, **body},
    }


LINES = [
    chat("greeting", "Hello, who are you?", max_tokens=14),
    chat("sampled", "Write a short poem about the sea.", max_tokens=9, temperature=0.9, top_p=0.8, seed=3),
    completion("text", "The quick brown fox", max_tokens=6, temperature=0),
    completion("ids", [5, 6, 7, 8, 9, 10, 11], max_tokens=11, temperature=0.7),  # seed from its custom_id
    completion("too-long", "Paris", max_tokens=600),  # over the 512-token context: an error line
    chat("short", "Numbers?", max_tokens=1),
]


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model", "qwen3")


@pytest.fixture
def batch_file(tmp_path: Path) -> Path:
    path = tmp_path / "batch.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in LINES))
    return path


def invoke(*args: str) -> Result:
    return CliRunner().invoke(app, ["run-local", *args])


def engine_outputs(model: Path, batch_file: Path, microbatches: int) -> dict[str, list[int]]:
    """The same requests through the in-process Engine (one stage, the same batches)."""
    tokenizer = load_tokenizer(model)
    lines = openai_batch.parse_batch(batch_file.read_bytes(), max_lines=10)
    requests, _ = prepare(
        lines, tokenizer, ModelConfig.load(model), stop_token_ids(tokenizer, model), LOCAL_TASK_ID
    )
    engine = Engine(
        [StageShard.load(model, 0, 4)], local_pages=64, num_microbatches=microbatches, max_seqs=16
    )
    outputs = engine.generate([r.prompt for r in requests], [r.params for r in requests])
    return {r.line.custom_id: out for r, out in zip(requests, outputs, strict=True)}


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(row) for row in path.read_text().splitlines()]


@pytest.mark.parametrize(
    "options",
    [
        ["--stages", "2", "--microbatches", "2", "--no-offload", "--threads", "1", "--max-batch-size", "3"],
        ["--stages", "4", "--microbatches", "auto", "--offload", "--latency-ms", "5"],
    ],
    ids=["2-stages", "4-stages-auto-offload"],
)
def test_every_request_comes_back_once_and_equals_the_engine(
    model: Path, batch_file: Path, tmp_path: Path, options: list[str]
) -> None:
    output = tmp_path / "out.jsonl"
    result = invoke("--model-dir", str(model), "--input", str(batch_file), "--output", str(output), *options)
    assert result.exit_code == 0, result.output
    microbatches = int(re.search(r"(\d+)\s+microbatches", result.stdout).group(1))  # type: ignore[union-attr]
    results = read_jsonl(output)
    errors = read_jsonl(tmp_path / "out.errors.jsonl")
    assert sorted(r["custom_id"] for r in results + errors) == sorted(line["custom_id"] for line in LINES)
    assert [e["custom_id"] for e in errors] == ["too-long"]
    assert errors[0]["error"]["code"] == "context_length_exceeded" and errors[0]["response"] is None
    expected = engine_outputs(model, batch_file, microbatches)
    tokenizer = load_tokenizer(model)
    stops = stop_token_ids(tokenizer, model)
    for line in results:
        body = line["response"]["body"]
        choice = body["choices"][0]
        ids = choice["token_ids"]
        assert ids == expected[line["custom_id"]], line["custom_id"]
        text = choice["message"]["content"] if body["object"] == "chat.completion" else choice["text"]
        assert text == tokenizer.decode(ids, skip_special_tokens=True)
        assert body["usage"]["completion_tokens"] == len(ids)
        assert choice["finish_reason"] == ("stop" if ids[-1] in stops else "length")
        assert line["error"] is None and line["response"]["status_code"] == 200
    assert {r["custom_id"]: len(r["response"]["body"]["choices"][0]["token_ids"]) for r in results}[
        "short"
    ] == 1


def one_line_error(result: Result) -> str:
    assert result.exit_code == 1, result.output
    text = result.stderr.strip()
    assert "\n" not in text and "Traceback" not in text, text
    assert text.startswith("error: "), text
    return text


def test_bad_input_gets_one_line_errors(model: Path, batch_file: Path, tmp_path: Path) -> None:
    out = str(tmp_path / "out.jsonl")
    common = ["--output", out]
    missing = one_line_error(
        invoke("--model-dir", str(model), "--input", str(tmp_path / "nope.jsonl"), *common)
    )
    assert "cannot read" in missing and "nope.jsonl" in missing
    no_model = usage_error(invoke("--model-dir", str(tmp_path / "none"), "--input", str(batch_file), *common))
    assert f"{tmp_path / 'none'} is not a checkpoint directory (it has no config.json)" in no_model
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert one_line_error(invoke("--model-dir", str(model), "--input", str(empty), *common)) == (
        "error: the file is empty"
    )
    assert "cannot split 4 layers into 5 stages" in one_line_error(
        invoke("--model-dir", str(model), "--input", str(batch_file), *common, "--stages", "5")
    )
    assert "--microbatches must be a positive integer or 'auto'" in one_line_error(
        invoke("--model-dir", str(model), "--input", str(batch_file), *common, "--microbatches", "0")
    )
    no_tokenizer = build_checkpoint("qwen3", tmp_path / "bare")
    assert f"no tokenizer in {no_tokenizer}" in one_line_error(
        invoke("--model-dir", str(no_tokenizer), "--input", str(batch_file), *common)
    )
    (no_tokenizer / "tokenizer.json").write_text((model / "tokenizer.json").read_text())
    assert "line 1: a chat request, but the tokenizer has no chat template" in one_line_error(
        invoke("--model-dir", str(no_tokenizer), "--input", str(batch_file), *common)
    )


def test_bad_lines_become_error_lines_and_the_others_run(model: Path, tmp_path: Path) -> None:
    bad = tmp_path / "mixed.jsonl"
    rows = [
        json.dumps(LINES[0]),
        '{"custom_id": "broken", "method": "POST"',
        json.dumps({**LINES[2], "custom_id": "embed", "url": "/v1/embeddings"}),
        json.dumps({k: v for k, v in LINES[1].items() if k != "body"}),
        json.dumps(LINES[0]),
    ]
    bad.write_text("\n".join(rows) + "\n")
    out = tmp_path / "out.jsonl"
    result = invoke("--model-dir", str(model), "--input", str(bad), "--output", str(out), "--stages", "1")
    assert result.exit_code == 0, result.output
    assert [line["custom_id"] for line in read_jsonl(out)] == [LINES[0]["custom_id"]]
    errors = {
        line["error"]["message"].split(":")[0]: line for line in read_jsonl(tmp_path / "out.errors.jsonl")
    }
    assert set(errors) == {"line 2", "line 3", "line 4", "line 5"}
    assert errors["line 2"]["custom_id"] is None and "malformed JSON" in errors["line 2"]["error"]["message"]
    assert (
        errors["line 3"]["custom_id"] == "embed" and "unsupported url" in errors["line 3"]["error"]["message"]
    )
    assert "body must be a JSON object" in errors["line 4"]["error"]["message"]
    assert "repeats line 1" in errors["line 5"]["error"]["message"]
