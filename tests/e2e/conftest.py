"""A whole local market per test module (demo.system.LocalSystem), a helper to wait on it, and, when a test of
it fails, the last lines of each of its processes' logs in the failure report."""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Iterator
from typing import Any, TypeVar

import pytest

from demo.system import LocalSystem

T = TypeVar("T")
LOG_LINES_ON_FAILURE = 15


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    """Adds the tail of every log of the test's LocalSystem to a failed test's report: a timeout in a market
    of several processes says nothing by itself."""
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    system = getattr(item, "funcargs", {}).get("system")
    if report.when != "call" or not report.failed or not isinstance(system, LocalSystem):
        return
    for log in sorted(system.workdir.glob("*.log")):
        tail = log.read_text(errors="replace").splitlines()[-LOG_LINES_ON_FAILURE:]
        report.sections.append((f"{log.name}, last {len(tail)} lines", "\n".join(tail)))


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
