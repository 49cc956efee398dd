"""Capacity admission: concurrency cap and scraped-metric guards."""

from __future__ import annotations

import pytest

from control_plane.admission.capacity import CapacityAdmission
from control_plane.admission.registry import build_admission, names
from control_plane.core.plugins import PluginParamsError, UnknownPluginError
from control_plane.core.worker_view import WorkerView
from tests.control_plane.policies.jobs import job


def worker(**fields: object) -> WorkerView:
    base: dict[str, object] = {"id": "w", "model": "default", "max_num_seqs": 4, "kv_tokens": 1000}
    return WorkerView(**(base | fields))  # type: ignore[arg-type]


def test_default_cap_is_max_num_seqs_and_the_knob_lowers_it() -> None:
    default = build_admission("capacity")
    assert default.admit(job("x"), worker(inflight=3), 0.0)
    assert not default.admit(job("x"), worker(inflight=4), 0.0)
    capped = build_admission("capacity", {"max_concurrency": 2})
    assert not capped.has_room(worker(inflight=2), 0.0)
    assert build_admission("capacity", {"max_concurrency": 99}).has_room(worker(inflight=3), 0.0)


def test_scraped_waiting_and_kv_usage_refuse_a_busy_worker_but_never_an_idle_one() -> None:
    admission = build_admission("capacity", {"kv_usage_max": 0.8})
    assert not admission.admit(job("x"), worker(inflight=1, waiting=2), 0.0)
    assert not admission.admit(job("x"), worker(inflight=1, kv_usage=0.85), 0.0)
    assert admission.admit(job("x"), worker(inflight=0, waiting=2, kv_usage=0.99), 0.0)
    lenient = build_admission("capacity", {"skip_waiting": False})
    assert lenient.admit(job("x"), worker(inflight=1, waiting=2), 0.0)


def test_token_fence_counts_prompt_and_expected_output() -> None:
    admission = build_admission("capacity", {"token_fence": 0.5})
    assert isinstance(admission, CapacityAdmission)
    assert admission.reserve(job("x", n_in=100, max_tokens=50)) == 150
    assert admission.reserve(job("x", n_in=100, max_tokens=50, predicted_out=10)) == 110
    busy = worker(inflight=1, inflight_tokens=400)
    assert admission.admit(job("x", n_in=50, max_tokens=50), busy, 0.0)
    assert not admission.admit(job("x", n_in=51, max_tokens=50), busy, 0.0)
    assert admission.admit(job("x", n_in=5000, max_tokens=50), worker(), 0.0)  # idle: admits


def test_preemption_cool_down() -> None:
    admission = build_admission("capacity", {"preemption_cooldown_s": 5.0})
    preempted = worker(inflight=1, last_preemption_at=10.0)
    assert not admission.admit(job("x"), preempted, 14.0)
    assert admission.admit(job("x"), preempted, 15.0)


def test_registry_validates_params() -> None:
    assert names() == ["capacity", "statera"]
    with pytest.raises(PluginParamsError):
        build_admission("capacity", {"max_concurency": 2})
    with pytest.raises(PluginParamsError):
        build_admission("statera", {"u_low": 2.0})
    with pytest.raises(UnknownPluginError):
        build_admission("nope")
    with pytest.raises(UnknownPluginError):
        build_admission("control_plane.placement.least_loaded:LeastLoadedPlacement")
    custom = build_admission("control_plane.admission.capacity:CapacityAdmission")
    assert custom.snapshot()["name"] == "capacity"
