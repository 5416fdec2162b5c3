"""Each shared protocol constant and parser is defined in one place (client_sdk.protocol, client_sdk.eip712):
a second definition anywhere in the project's code fails this test, so formats cannot drift apart again."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("client_sdk", "coordinator", "miner", "demo", "bench")
FINAL = ("completed", "failed", "expired", "cancelled")
ACTIVE = ("validating", "in_progress", "finalizing", "cancelling")


def _sources() -> list[tuple[Path, ast.Module]]:
    return [
        (path, ast.parse(path.read_text(), str(path)))
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
    ]


def _where(path: Path, node: ast.AST) -> str:
    return f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}"


def test_shared_constants_are_defined_once() -> None:
    assigned: dict[str, list[str]] = {
        "MAX_SEED": [],
        "FINAL_BATCH_STATUSES": [],
        "ACTIVE_BATCH_STATUSES": [],
        "SETTLING_BATCH_STATUSES": [],
        "MAX_BATCH_LINES": [],
        "STAGE_DTYPES": [],
    }
    status_tuples = []
    for path, tree in _sources():
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name) and target.id in assigned:
                        assigned[target.id].append(_where(path, node))
            if isinstance(node, ast.Tuple) and all(isinstance(e, ast.Constant) for e in node.elts):
                values = {e.value for e in node.elts if isinstance(e, ast.Constant)}
                if values in (set(FINAL), set(ACTIVE)):
                    status_tuples.append(_where(path, node))
    for name, places in assigned.items():
        assert places == [f"client_sdk/protocol/constants.py:{places[0].rsplit(':', 1)[1]}"], (name, places)
    assert all(p.startswith("client_sdk/protocol/constants.py") for p in status_tuples), status_tuples


def _is_http_body(node: ast.AST) -> bool:
    """A call that yields an HTTP answer's JSON: `json_of(response)` or `response.json()`."""
    if not isinstance(node, ast.Call):
        return False
    function = node.func
    return (isinstance(function, ast.Name) and function.id == "json_of") or (
        isinstance(function, ast.Attribute) and function.attr == "json"
    )


def test_commitments_and_error_envelopes_are_parsed_in_one_place() -> None:
    commitment_reads, envelope_reads = [], []
    for path, tree in _sources():
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant)):
                continue
            if node.slice.value == "results_root" and isinstance(node.ctx, ast.Load):
                commitment_reads.append(_where(path, node))  # a commitment field read by hand
            if node.slice.value == "error" and _is_http_body(node.value):
                envelope_reads.append(_where(path, node))  # an HTTP error envelope read by hand
    assert all(p.startswith("client_sdk/eip712.py") for p in commitment_reads), commitment_reads
    assert envelope_reads == [], envelope_reads


def _literal(node: ast.AST | None) -> object:
    return node.value if isinstance(node, ast.Constant) else None


def _named_values(node: ast.AST) -> list[tuple[str, ast.AST | None]]:
    """The (name, value) pairs a node binds: assignments, keyword arguments and parameters' defaults."""
    if isinstance(node, ast.Assign):
        return [(t.id, node.value) for t in node.targets if isinstance(t, ast.Name)]
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return [(node.target.id, node.value)]
    if isinstance(node, ast.keyword) and node.arg is not None:
        return [(node.arg, node.value)]
    if isinstance(node, ast.FunctionDef):
        args = node.args.posonlyargs + node.args.args
        defaults = list(zip(args[len(args) - len(node.args.defaults) :], node.args.defaults, strict=True))
        defaults += [(a, d) for a, d in zip(node.args.kwonlyargs, node.args.kw_defaults, strict=True) if d]
        return [(a.arg, d) for a, d in defaults]
    return []


def test_limits_page_size_dtypes_and_the_microbatch_rule_have_one_home() -> None:
    """50,000 lines (OpenAI's limit), the KV page size, the table of stage dtypes and DeServe's microbatch
    rule: each written once, in its home."""
    batch_lines, page_sizes, dtype_tables, rules = [], [], [], []
    for path, tree in _sources():
        for node in ast.walk(tree):
            for name, value in _named_values(node):
                if "line" in name.lower() and _literal(value) == 50_000:
                    batch_lines.append(_where(path, node))
                if name.lower() in ("page_size", "page") and _literal(value) is not None:
                    page_sizes.append(_where(path, node))
            if isinstance(node, ast.Dict):
                keys = {_literal(k) for k in node.keys}
                if {"float32", "bfloat16"} <= keys and any(isinstance(v, ast.Attribute) for v in node.values):
                    dtype_tables.append(_where(path, node))  # a hand-written name -> torch dtype table
            if isinstance(node, ast.FunctionDef) and node.name.startswith("microbatches"):
                rules.append(_where(path, node))
    assert [p.split(":")[0] for p in batch_lines] == ["client_sdk/protocol/constants.py"], batch_lines
    assert [p.split(":")[0] for p in page_sizes] == ["miner/kv/cache.py"], page_sizes
    assert dtype_tables == [], dtype_tables
    assert [p.split(":")[0] for p in rules] == ["client_sdk/protocol/pipeline.py"], rules
