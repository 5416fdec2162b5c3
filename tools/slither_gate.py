"""Fails when Slither reports a medium or high finding that `docs/slither-triage.md` does not explain.

Reads Slither's JSON report (argv[1]) and the triage file; a finding is triaged when the file has a line
`- check: CHECK | where: CONTRACT.FUNCTION` (for a local variable: FUNCTION.VARIABLE) naming it.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

TRIAGE = Path(__file__).resolve().parent.parent / "docs" / "slither-triage.md"
ENTRY = re.compile(r"^- check: (\S+) \| where: (\S+)", re.MULTILINE)


def where(element: dict[str, Any]) -> str:
    """`Contract.function`, or `function.variable` for a local variable."""
    parent = element.get("type_specific_fields", {}).get("parent", {})
    return f"{parent.get('name')}.{element.get('name')}"


def main(report_path: str) -> int:
    triaged = set(ENTRY.findall(TRIAGE.read_text()))
    report = json.loads(Path(report_path).read_text())
    untriaged = []
    for finding in report.get("results", {}).get("detectors", []):
        key = (finding["check"], where(finding["elements"][0]))
        if finding["impact"] in ("High", "Medium") and key not in triaged:
            untriaged.append(f"{finding['impact']}: {finding['description'].splitlines()[0]}")
    for line in untriaged:
        print(line)
    print(f"slither: {len(untriaged)} untriaged medium/high finding(s)")
    return 1 if untriaged else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
