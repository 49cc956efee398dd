"""What a change review and the audit table show (pure): field-by-field diffs, readable
values, and whether the scheduler leader has applied a change."""

from __future__ import annotations

from console.applied import policy_applied, weight_applied
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
