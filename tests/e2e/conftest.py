"""Fixtures for end-to-end tests: a fresh real deployment per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from control_plane.gc_freeze import freeze_startup_heap
from tests.support.cluster import Cluster


@pytest.fixture(autouse=True)
def _quiet_heap() -> None:
    """The test process is the load generator: a full collection over the whole suite's heap
    (about 850 MB by the time the e2e tests run) stalls all of its clients at once, which can
    let the workers drain a queue the test keeps full — the likeliest reason a full-suite run
    saw a flooding tenant's queue empty and the fast lane open mid-flood, which the test alone
    never showed. Frozen before each test, as the services freeze their start-up heap."""
    freeze_startup_heap()


@pytest.fixture
def cluster(redis_url: str, tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(redis_url=redis_url, workdir=tmp_path)
    try:
        yield c
    finally:
        c.stop()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/e2e/" in str(item.fspath):
            item.add_marker(pytest.mark.e2e)
