"""H-MAS Table 6 and its importance scaling."""

from __future__ import annotations

import pytest

from control_plane.perception.tasks import TASK_TYPES, importance_factor, task_slo


def test_thirteen_types_and_the_scaling_bounds() -> None:
    assert len(TASK_TYPES) == 13
    assert importance_factor(0.5) == pytest.approx(1.2)
    assert importance_factor(1.0) == pytest.approx(0.8)
    assert importance_factor(0.0) == importance_factor(0.5)  # clipped
    slo = task_slo("ResearchAndCommunication", importance=1.0)
    assert (
        slo is not None and slo.ttft_s == pytest.approx(10.4) and slo.tpot_s == pytest.approx(0.12)
    )
    assert task_slo("Nope") is None
