"""Every external or public function of the contracts carries NatSpec: its own, or through `@inheritdoc` the
documented function of its interface."""

from __future__ import annotations

import re
from pathlib import Path

SOURCES = Path(__file__).resolve().parent.parent / "contracts" / "src"
FUNCTION = re.compile(r"^\s*function\s+(\w+)\s*\(")


def documented(path: Path) -> dict[str, str | None]:
    """Each external or public function of `path`: the interface its NatSpec inherits from, "" when it has its
    own, None when it has none."""
    lines = path.read_text().splitlines()
    found: dict[str, str | None] = {}
    for i, line in enumerate(lines):
        match = FUNCTION.match(line)
        if match is None:
            continue
        signature = " ".join(lines[i : i + 10]).split("{")[0].split(";")[0]
        if not re.search(r"\b(external|public)\b", signature):
            continue
        comments = []
        j = i - 1
        while j >= 0 and lines[j].strip().startswith("///"):
            comments.append(lines[j].strip())
            j -= 1
        inherited = [c.split()[2] for c in comments if c.startswith("/// @inheritdoc")]
        found[match.group(1)] = inherited[0] if inherited else ("" if comments else None)
    return found


def test_every_external_function_has_natspec() -> None:
    contracts = {p.stem: documented(p) for p in SOURCES.rglob("*.sol")}
    assert len(contracts) >= 10
    undocumented = [
        f"{contract}.{name}"
        for contract, functions in contracts.items()
        for name, source in functions.items()
        if source is None or (source and contracts.get(source, {}).get(name) is None)
    ]
    assert undocumented == []
