"""The newcomer's map in docs/architecture.md names real files: every path it puts in backticks exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PATH = re.compile(r"`((?:client_sdk|coordinator|miner|demo|bench|contracts|tests)/[\w/.]*)`")


def test_every_path_the_architecture_page_names_exists() -> None:
    named = PATH.findall((ROOT / "docs" / "architecture.md").read_text())
    assert len(named) > 30  # the map is there
    assert [path for path in named if not (ROOT / path).exists()] == []
