"""Policy & knobs page against changes made elsewhere: a change reads as applied once the
leader runs it (`auto`: once its controller runs), a check that fails shows its error, a knob
changed since the review is refused and reviewed again, and the forms show the values in force
(Streamlit keeps a keyed widget's own state and ignores a new `value=`)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from console.admin_client import AdminApiError, AdminClient
from control_plane.contracts.knobs import KnobValue, PluginChoice
from control_plane.core.ledger import Ledger
from control_plane.scheduler.rebuild import build_core
from tests.console.conftest import AdminServer, publish_core, signed_in


def _publish(admin_server: AdminServer, knobs: dict[str, KnobValue]) -> None:
    """A scheduler leader built from `knobs` publishes its live view."""
    core = build_core(knobs, Ledger(), "vtc")
    publish_core(admin_server, core)


def _put(admin_server: AdminServer, path: str, body: dict[str, Any]) -> None:
    with admin_server.http() as http:
        resp = http.put(path, json={**body, "reason": "another operator"})
    assert resp.status_code == 200, resp.text


def _knob(admin_server: AdminServer, name: str) -> Any:
    with admin_server.http() as http:
        return http.get("/admin/knobs").json()["knobs"].get(name)


def _weight_reviewed(
    admin_server: AdminServer, app_test: AppTest, tenant: str, weight: float, reason: str
) -> AppTest:
    """A new tenant, and the policy page with a change of its weight under review."""
    with admin_server.http() as http:
        http.post("/admin/tenants", json={"name": tenant, "reason": "setup"})
    at = signed_in(app_test, "app_pages/policy.py")
    at.selectbox(key="weight_node").select(tenant).run()
    at.number_input(key="weight_value").set_value(weight)
    at.text_input(key="weight_reason").input(reason)
    at.button(key="weight_submit").click().run()
    return at


def test_auto_reads_applied_once_its_controller_runs(
    admin_server: AdminServer, app_test: AppTest
) -> None:
    at = signed_in(app_test, "app_pages/policy.py")
    at.selectbox(key="policy_name").select("auto").run()
    at.text_input(key="policy_reason").input("let the controller choose")
    at.button(key="policy_submit").click().run()
    at.button(key="policy_confirm").click().run()
    assert not at.exception, at.exception
    assert any("Waiting for the scheduler leader to apply auto" in i.value for i in at.info)

    knob = _knob(admin_server, "policy")
    _publish(admin_server, {"policy": PluginChoice("auto", knob["params"])})
    at.run()  # the leader reports the policy its controller runs (not "auto")
    assert any("Applied by the scheduler leader" in s.value for s in at.success)
    assert "policy_watch" not in at.session_state  # cleared once applied
    at.run()
    assert not any("Waiting for the scheduler leader" in i.value for i in at.info)


def test_a_check_that_fails_shows_its_error(
    admin_server: AdminServer, app_test: AppTest, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = _weight_reviewed(admin_server, app_test, "checked", 3.0, "trial")

    def down(self: AdminClient) -> dict[str, Any]:
        raise AdminApiError(503, "Arbiter's state store is unreachable", code="state_unavailable")

    monkeypatch.setattr(AdminClient, "state", down)
    at.button(key="weight_confirm").click().run()
    assert not at.exception, at.exception
    assert any("state store is unreachable" in e.value for e in at.error), at.error
    assert not any("Waiting for the scheduler leader" in i.value for i in at.info)


def test_a_knob_changed_since_the_review_is_refused_and_reviewed_again(
    admin_server: AdminServer, app_test: AppTest
) -> None:
    _put(admin_server, "/admin/knobs/queue_cap", {"value": {"default": 64}})
    at = signed_in(app_test, "app_pages/policy.py")
    assert at.number_input(key="queue_default").value == 64
    at.number_input(key="queue_default").set_value(100)
    at.text_input(key="queue_reason").input("more room")
    at.button(key="queue_submit").click().run()
    _put(admin_server, "/admin/knobs/queue_cap", {"value": {"default": 32}})  # meanwhile

    at.button(key="queue_confirm").click().run()
    assert not at.exception, at.exception
    assert _knob(admin_server, "queue_cap") == {"default": 32}  # the other change stands
    assert any("changed since you reviewed it" in w.value for w in at.warning), at.warning
    diff = next(t.value for t in at.table if "field" in t.value)
    assert diff.to_dict("records") == [{"field": "default", "current": "32", "new": "100"}]

    at.button(key="queue_confirm").click().run()
    assert not at.exception, at.exception
    assert _knob(admin_server, "queue_cap") == {"default": 100}
    assert any("Cap set" in s.value for s in at.success)


def test_a_policy_switched_since_the_review_is_refused_and_reviewed_again(
    admin_server: AdminServer, app_test: AppTest
) -> None:
    """Before, confirming a switch reviewed over one policy silently replaced a switch another
    operator made after the review."""
    _put(admin_server, "/admin/policy", {"name": "fcfs"})
    at = signed_in(app_test, "app_pages/policy.py")
    at.selectbox(key="policy_name").select("sjf").run()
    at.text_input(key="policy_reason").input("short jobs first")
    at.button(key="policy_submit").click().run()
    _put(admin_server, "/admin/policy", {"name": "edf"})  # meanwhile

    at.button(key="policy_confirm").click().run()
    assert not at.exception, at.exception
    assert _knob(admin_server, "policy")["name"] == "edf"  # the other switch stands
    assert any("policy changed since you reviewed it" in w.value for w in at.warning), at.warning
    diff = next(t.value for t in at.table if "field" in t.value)
    assert {"field": "name", "current": "edf", "new": "sjf"} in diff.to_dict("records")

    at.button(key="policy_confirm").click().run()
    assert not at.exception, at.exception
    assert _knob(admin_server, "policy")["name"] == "sjf"
    assert any("Policy: sjf." in s.value for s in at.success)


def test_a_weight_changed_since_the_review_is_refused_and_reviewed_again(
    admin_server: AdminServer, app_test: AppTest
) -> None:
    """Before, confirming a weight reviewed over one value silently replaced another
    operator's later change of it."""
    at = _weight_reviewed(admin_server, app_test, "shared", 3.0, "more for shared")
    _put(admin_server, "/admin/weights/shared", {"weight": 8.0})  # meanwhile

    at.button(key="weight_confirm").click().run()
    assert not at.exception, at.exception
    with admin_server.http() as http:
        assert http.get("/admin/tenants/shared").json()["weight"] == 8.0  # the other stands
    assert any("weight of shared changed since you reviewed it" in w.value for w in at.warning)
    diff = next(t.value for t in at.table if "field" in t.value)
    assert diff.to_dict("records") == [{"field": "weight", "current": "8", "new": "3"}]

    at.button(key="weight_confirm").click().run()
    assert not at.exception, at.exception
    with admin_server.http() as http:
        assert http.get("/admin/tenants/shared").json()["weight"] == 3.0
    assert any("shared: weight 3." in s.value for s in at.success)


def test_a_weight_conflict_over_a_node_deleted_since_is_dropped(
    admin_server: AdminServer, app_test: AppTest
) -> None:
    """A refused weight change is reviewed again over the weight in force; when its node was
    deleted meanwhile there is none, and it must not come back as a change sent without its
    check (a reviewer's finding: `expected` was None, so the confirm was unchecked)."""
    at = _weight_reviewed(admin_server, app_test, "brief", 3.0, "more")
    _put(admin_server, "/admin/weights/brief", {"weight": 8.0})  # meanwhile
    with admin_server.http() as http:  # a second tenant keeps the weights table on the page
        http.post("/admin/tenants", json={"name": "stays", "reason": "setup"})
    at.session_state["weight_conflict"] = at.session_state["weight_pending"]
    del at.session_state["weight_pending"]
    with admin_server.http() as http:
        http.delete("/admin/tenants/brief", params={"reason": "gone"})
    at.run()
    assert not at.exception, at.exception
    assert any("brief no longer exists" in w.value for w in at.warning), at.warning
    assert "weight_pending" not in at.session_state
    assert "weight_conflict" not in at.session_state


def test_the_forms_show_the_values_in_force(admin_server: AdminServer, app_test: AppTest) -> None:
    with admin_server.http() as http:
        http.post("/admin/tenants", json={"name": "heavy", "reason": "setup"})
    _put(admin_server, "/admin/weights/heavy", {"weight": 4.0})
    _put(admin_server, "/admin/policy", {"name": "fcfs"})
    at = signed_in(app_test, "app_pages/policy.py")
    at.selectbox(key="weight_node").select("heavy").run()
    assert at.number_input(key="weight_value").value == 4.0  # the node's weight, not 1.0
    assert at.selectbox(key="policy_name").value == "fcfs"

    _put(admin_server, "/admin/policy", {"name": "exfairs", "params": {"alpha": 0.3, "beta": 0.25}})
    _put(admin_server, "/admin/knobs/slo_defaults", {"value": {"ttft_ms": 900.0}})
    _put(admin_server, "/admin/knobs/queue_cap", {"value": {"default": 48}})
    _put(admin_server, "/admin/weights/heavy", {"weight": 6.0})
    at.run()
    assert not at.exception, at.exception
    assert at.selectbox(key="policy_name").value == "exfairs"
    assert at.number_input(key="policy_exfairs_alpha").value == 0.3
    assert (at.number_input(key="alpha").value, at.number_input(key="beta").value) == (0.3, 0.25)
    assert at.number_input(key="slo_ttft_ms").value == 900.0
    assert at.number_input(key="queue_default").value == 48
    assert at.number_input(key="weight_value").value == 6.0

    at.number_input(key="queue_default").set_value(50)
    at.text_input(key="queue_reason").input("a little more")
    at.button(key="queue_submit").click().run()
    assert at.number_input(key="queue_default").value == 50  # an edit of the value is kept
    diff = next(t.value for t in at.table if "field" in t.value)
    assert diff.to_dict("records") == [{"field": "default", "current": "48", "new": "50"}]


def test_a_policy_named_by_its_module_path_reads_as_running(
    admin_server: AdminServer, app_test: AppTest
) -> None:
    """An admin's plug-in `module:Class`: the leader reports the name the class gives itself
    ('fcfs'), and the page said 'The scheduler leader still runs 'fcfs'; it switches shortly'
    for ever."""
    path = "control_plane.policies.fcfs:FcfsPolicy"
    _put(admin_server, "/admin/policy", {"name": path, "params": {}})
    _publish(admin_server, {"policy": PluginChoice(path, {})})
    at = signed_in(app_test, "app_pages/policy.py")
    assert not at.exception, at.exception
    assert any(path in s.value for s in at.subheader)
    assert not [i.value for i in at.info if "still runs" in i.value]


def test_a_change_the_api_made_with_warnings_says_them(
    admin_server: AdminServer, app_test: AppTest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The weight is committed but the scheduler was not told it (Redis was unavailable): the
    API answers 200 with `warnings`; the page said only 'weight 3.' and then 'Waiting for the
    scheduler leader to apply…' for ever."""
    told = "the scheduler was not told the new weight (Redis unavailable: test)"

    async def untold(*_: Any) -> list[str]:
        return [told]

    monkeypatch.setattr("control_plane.api.admin.tenants.publish_weight", untold)
    at = _weight_reviewed(admin_server, app_test, "untold", 3.0, "more")
    at.button(key="weight_confirm").click().run()
    assert not at.exception, at.exception
    assert any("untold: weight 3." in s.value for s in at.success)  # committed in SQL
    assert any(told in w.value for w in at.warning), [w.value for w in at.warning]
    assert not any("Waiting for the scheduler leader" in i.value for i in at.info)


def test_with_a_stale_leader_a_change_does_not_read_as_about_to_apply(
    admin_server: AdminServer, app_test: AppTest
) -> None:
    """The leader stopped 2 minutes ago (its view stays in Redis): the page showed what it ran
    as now and 'Waiting for the scheduler leader to apply…' for ever."""
    core = build_core({}, Ledger(), "vtc")
    publish_core(admin_server, core, time.time() - 120)
    at = _weight_reviewed(admin_server, app_test, "stale-leader", 4.0, "more")
    assert any("last published 12" in e.value for e in at.error), [e.value for e in at.error]
    at.button(key="weight_confirm").click().run()
    assert not at.exception, at.exception
    assert any("no scheduler leader is publishing" in e.value for e in at.error), at.error
    assert not any("Waiting for the scheduler leader" in i.value for i in at.info)


def test_a_fairness_change_the_policy_in_force_does_not_take_says_so(
    admin_server: AdminServer, app_test: AppTest
) -> None:
    """Under a pinned policy without α and β the page said 'α and β updated.' as if the
    scheduler took them."""
    _put(admin_server, "/admin/policy", {"name": "fcfs"})
    at = signed_in(app_test, "app_pages/policy.py")
    next(n for n in at.number_input if n.label == "α").set_value(0.5)
    at.text_input(key="fairness_reason").input("softer")
    at.button(key="fairness_submit").click().run()
    at.button(key="fairness_confirm").click().run()
    assert not at.exception, at.exception
    assert any("α and β updated" in s.value for s in at.success)
    assert any("scheduling is unchanged" in w.value for w in at.warning), at.warning
    assert _knob(admin_server, "fairness")["alpha"] == 0.5


def test_a_knob_the_leader_could_not_apply_is_said_with_its_reason(
    admin_server: AdminServer, app_test: AppTest
) -> None:
    """A plug-in the leader's host cannot build (its module missing there) was only logged:
    the page kept saying the leader switches shortly, for ever."""
    knobs: dict[str, KnobValue] = {
        "policy": PluginChoice("vtc"),
        "placement": PluginChoice("missing.module:Placement"),
    }
    publish_core(admin_server, build_core(knobs, Ledger(), "vtc"))
    with admin_server.http() as http:
        errors = http.get("/admin/policy").json()["knob_errors"]
    assert list(errors) == ["placement"] and "No module named 'missing'" in errors["placement"]
    at = signed_in(app_test, "app_pages/policy.py")
    assert not at.exception, at.exception
    assert any(
        "could not apply the placement knob" in e.value and "missing" in e.value for e in at.error
    ), [e.value for e in at.error]
