"""A whole local market per test module (demo.system.LocalSystem) and a helper to wait on it."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import TypeVar

import pytest

from demo.system import LocalSystem

T = TypeVar("T")


@pytest.fixture(scope="module")
def system(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalSystem]:
    with LocalSystem(tmp_path_factory.mktemp("system")) as running:
        yield running


def wait_for(condition: Callable[[], T], timeout: float = 240.0, poll: float = 0.5) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(poll)
    raise AssertionError("timed out waiting")
