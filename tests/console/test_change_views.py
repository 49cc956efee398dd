"""What a change review and the audit table show (pure): field-by-field diffs, readable
values, and whether the scheduler leader has applied a change."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from console.admin_client import AdminApiError
from console.applied import policy_applied, policy_note, weight_applied, weight_note
from console.form_specs import audit_frame, diff_rows, readable


def test_diff_lists_only_changed_fields_readably() -> None:
    old = {"name": "vtc", "params": {"alpha": 0.7, "tiers": [1, 2]}}
    new = {"name": "exfairs", "params": {"alpha": 0.7, "beta": 0.1}}
    assert diff_rows(old, new) == [
        {"field": "name", "current": "vtc", "new": "exfairs"},
        {"field": "params.tiers", "current": "1, 2", "new": "—"},
        {"field": "params.beta", "current": "—", "new": "0.1"},
    ]
    assert diff_rows({"weight": 1.0}, {"weight": 1.0}) == []


def test_audit_values_read_as_field_value_pairs() -> None:
    assert readable({"weight": 3.0}) == "weight: 3"
    assert readable(None) == "—" and readable(True) == "yes"
    assert readable({"name": "fcfs", "params": {}}) == "name: fcfs; params: {}"
    frame = audit_frame(
        [
            {
                "at": 0.0,
                "actor": "olga",
                "action": "tenant.update",
                "target": "tenant:acme",
                "old": {"weight": 1.0},
                "new": {"weight": 2.5},
                "reason": "r",
            }
        ]
    )
    assert (frame.loc[0, "old"], frame.loc[0, "new"]) == ("weight: 1", "weight: 2.5")


def test_applied_when_the_leader_reports_it() -> None:
    asked = {"name": "exfairs", "params": {"alpha": 0.6}}
    assert not policy_applied(asked, None)
    assert not policy_applied(asked, {"name": "vtc", "params": {}})
    assert not policy_applied(asked, {"name": "exfairs", "params": {"alpha": 0.7}})
    assert policy_applied(asked, {"name": "exfairs", "params": {"alpha": 0.6, "beta": 0.1}})
    assert weight_applied("acme/chat", 2.0, {"acme/chat": 2.0})
    assert not weight_applied("acme/chat", 2.0, {"acme/chat": 1.0})
    assert not weight_applied("acme", 2.0, None)


AUTO = {"name": "auto", "params": {"selector": "rules", "pool": ["fcfs", "edf"], "period_s": 30.0}}
CONTROLLER = {"selector": "rules", "pool": ["fcfs", "edf"], "period_s": 30.0, "current": "edf"}


def test_auto_is_applied_once_the_controller_runs_it() -> None:
    """The leader reports the concrete policy the controller runs, never `auto`."""
    running = {"name": "edf", "params": {}}
    assert not policy_applied(AUTO, running, None)  # no controller attached yet
    assert policy_applied(AUTO, running, CONTROLLER)
    bandit = {"name": "auto", "params": {**AUTO["params"], "selector": "bandit"}}
    assert not policy_applied(bandit, running, CONTROLLER)  # still the old controller
    # a pinned policy is applied once the controller is gone, not because it chose the same
    assert not policy_applied({"name": "edf", "params": {}}, running, CONTROLLER)
    assert policy_applied({"name": "edf", "params": {}}, running, None)


def _failing(exc: AdminApiError) -> Any:
    def fetch() -> Mapping[str, Any]:
        raise exc

    return fetch


def test_a_failed_check_reads_as_the_error_not_as_waiting() -> None:
    down = AdminApiError(503, "Redis unreachable", code="state_unavailable")
    note = policy_note(AUTO, _failing(down))
    assert note.kind == "error" and "Redis unreachable" in note.text and not note.done
    refused = weight_note({"node": "t", "weight": 2.0}, _failing(AdminApiError(401, "revoked")))
    assert refused.kind == "error" and "revoked" in refused.text
    no_leader = AdminApiError(503, "No scheduler leader", code="no_live_state")
    waiting = weight_note({"node": "t", "weight": 2.0}, _failing(no_leader))
    assert waiting.kind == "info" and "Waiting" in waiting.text and not waiting.done
    view = {"running": {"name": "edf", "params": {}}, "controller": CONTROLLER}
    applied = policy_note(AUTO, lambda: view)
    assert applied.kind == "success" and applied.done  # the watch can be cleared
    assert policy_note(AUTO, lambda: {**view, "controller": None}).kind == "info"
    assert weight_note({"node": "t", "weight": 2.0}, lambda: {"weights": {"t": 2.0}}).done


def test_a_change_cannot_be_seen_applied_while_no_leader_publishes() -> None:
    """A stopped leader's view stays in Redis: the notes said 'Waiting for the scheduler
    leader to apply…' for ever, as if one were about to."""
    asked = {"name": "exfairs", "params": {}}
    stale = {"running": {"name": "vtc", "params": {}}, "running_age_s": 120.0}
    note = policy_note(asked, lambda: stale)
    assert note.kind == "error" and "120 s old" in note.text and not note.done
    fresh = {**stale, "running_age_s": 1.0}
    assert policy_note(asked, lambda: fresh).kind == "info"
    weight = {"node": "acme", "weight": 2.0}
    note = weight_note(weight, lambda: {"weights": {"acme": 1.0}, "age_s": 300.0})
    assert note.kind == "error" and "300 s old" in note.text
    applied = weight_note(weight, lambda: {"weights": {"acme": 2.0}, "age_s": 300.0})
    assert applied.kind == "success"  # it did apply it, before it stopped
