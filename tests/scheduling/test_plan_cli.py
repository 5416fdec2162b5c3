"""`coordinator plan` and `coordinator simulate`: the JSON schema of issue 3 for every strategy on the
benchmark clusters, and one-line errors for bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from bench._clusters import QWEN3_32B, quality_clusters
from coordinator.cli.app import app
from coordinator.scheduling.strategies import STRATEGIES

CLUSTERS = quality_clusters()


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("plan")
    paths = {"model": root / "config.json"}
    paths["model"].write_text(json.dumps(QWEN3_32B))
    for i, cluster in enumerate(CLUSTERS.values()):
        paths[f"cluster{i}"] = root / f"cluster{i}.json"
        paths[f"cluster{i}"].write_text(json.dumps(cluster))
    return paths


def check_schema(document: Any, strategy: str, gpus: set[str], layers: int) -> None:
    assert set(document) == {"strategy", "pipelines", "metrics"}
    assert document["strategy"] == strategy
    assert isinstance(document["metrics"], dict)
    assert isinstance(document["pipelines"], list) and document["pipelines"]
    for pipeline in document["pipelines"]:
        assert set(pipeline) == {"stages"}
        position = 0
        for stage in pipeline["stages"]:
            assert set(stage) == {"gpu", "layers"} and stage["gpu"] in gpus
            start, end = stage["layers"]
            assert isinstance(start, int) and isinstance(end, int)
            assert start == position < end  # half-open, zero-based, contiguous
            position = end
        assert position == layers


@pytest.mark.parametrize("index", range(len(CLUSTERS)))
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_plan_json_validates_for_every_strategy(files: dict[str, Path], index: int, strategy: str) -> None:
    args = ["plan", "--cluster", str(files[f"cluster{index}"]), "--model-config", str(files["model"])]
    result = CliRunner().invoke(app, [*args, "--strategy", strategy, "--json"])
    cluster = list(CLUSTERS.values())[index]
    if strategy == "hypercluster" and len(cluster["gpus"]) > QWEN3_32B["num_hidden_layers"]:
        # Algorithm 1 as written gives every GPU at least one layer: more GPUs than layers cannot work.
        assert result.exit_code == 1
        assert result.stderr.startswith("error: hypercluster: Algorithm 1 gives the last GPU")
        return
    assert result.exit_code == 0, result.output
    check_schema(json.loads(result.stdout), strategy, {g["id"] for g in cluster["gpus"]}, 64)


def test_plan_table_and_simulate(files: dict[str, Path], tmp_path: Path) -> None:
    args = ["--cluster", str(files["cluster0"]), "--model-config", str(files["model"])]
    shown = CliRunner().invoke(app, ["plan", *args])
    assert shown.exit_code == 0 and "pipeline" in shown.stdout
    workload = tmp_path / "workload.json"
    workload.write_text(json.dumps({"requests": 60, "output_tokens": [1, 16], "seed": 3}))
    run = CliRunner().invoke(app, ["simulate", *args, "--workload", str(workload), "--json"])
    assert run.exit_code == 0, run.output
    report = json.loads(run.stdout)
    assert report["strategy"] == "parallax" and report["completed"] == 60
    again = CliRunner().invoke(app, ["simulate", *args, "--workload", str(workload), "--json"])
    assert json.loads(again.stdout) == report


def gpu(**fields: Any) -> dict[str, Any]:
    return {"id": "g0", "type": "RTX4090", "region": "us-east-1", **fields}


@pytest.mark.parametrize(
    ("cluster", "message"),
    [
        ('{"gpus": [', "error: --cluster: "),
        ({"gpus": [gpu(type="TPUv9")]}, "error: gpus[0].type: unknown GPU type 'TPUv9' and no vram_gb given"),
        ({"gpus": [gpu(vram_gb=-24)]}, "error: gpus[0].vram_gb: must be positive, got -24"),
        ({"gpus": [gpu()]}, "error: cluster: too small to hold one replica (18 layer units in all"),
        ({"gpus": "many"}, 'error: cluster: expected a JSON object with a "gpus" list'),
    ],
)
def test_bad_cluster_gets_one_line_naming_the_field(
    files: dict[str, Path], tmp_path: Path, cluster: Any, message: str
) -> None:
    path = tmp_path / "cluster.json"
    path.write_text(cluster if isinstance(cluster, str) else json.dumps(cluster))
    result = CliRunner().invoke(app, ["plan", "--cluster", str(path), "--model-config", str(files["model"])])
    assert result.exit_code == 1
    assert result.stderr.startswith(message) and result.stderr.count("\n") == 1
    assert "not valid JSON" in result.stderr or not message.endswith("--cluster: ")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--strategy", "magic"], "error: strategy: unknown 'magic'; choose one of parallax"),
        (["--kv-reserve", "1.5"], "error: --kv-reserve: must be in [0, 1), got 1.5"),
        (["--dtype", "float64"], "error: model.torch_dtype: unsupported dtype 'float64'"),
    ],
)
def test_bad_options(files: dict[str, Path], extra: list[str], message: str) -> None:
    args = ["plan", "--cluster", str(files["cluster0"]), "--model-config", str(files["model"]), *extra]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1 and result.stderr.startswith(message) and result.stderr.count("\n") == 1


def test_missing_files_and_bad_model(files: dict[str, Path], tmp_path: Path) -> None:
    missing = CliRunner().invoke(
        app, ["plan", "--cluster", str(tmp_path / "nope.json"), "--model-config", str(files["model"])]
    )
    assert missing.exit_code == 1 and missing.stderr.startswith("error: --cluster: cannot read ")
    model = tmp_path / "config.json"
    model.write_text(json.dumps({**QWEN3_32B, "hidden_size": -1}))
    bad = CliRunner().invoke(app, ["plan", "--cluster", str(files["cluster0"]), "--model-config", str(model)])
    assert bad.exit_code == 1 and bad.stderr.startswith(
        "error: model.hidden_size: must be at least 1, got -1"
    )
    workload = tmp_path / "workload.json"
    workload.write_text(json.dumps({"requests": -5}))
    args = [
        "simulate",
        "--cluster",
        str(files["cluster0"]),
        "--model-config",
        str(files["model"]),
        "--workload",
        str(workload),
    ]
    run = CliRunner().invoke(app, args)
    assert run.exit_code == 1 and run.stderr.startswith(
        "error: workload.requests: must be at least 1, got -5"
    )
