"""Freezing a service's start-up heap: survivors leave the collector's generations."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from control_plane.gc_freeze import freeze_startup_heap


@pytest.fixture(autouse=True)
def _thawed() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()


def test_what_survives_start_up_is_frozen_and_young_garbage_still_collected() -> None:
    kept = [object() for _ in range(1000)]
    frozen = freeze_startup_heap()
    assert frozen >= len(kept) and gc.get_freeze_count() == frozen
    assert all(not gc.is_finalized(o) for o in kept)
    cycle: list[object] = []
    cycle.append(cycle)  # garbage made after the freeze is collected as before
    del cycle
    assert gc.collect() >= 1


def test_it_can_be_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARBITER_GC_FREEZE", "0")
    assert freeze_startup_heap() == 0
    assert gc.get_freeze_count() == 0
