"""Policy & knobs page: active policy, forms that change it with a reason, the API's field
errors shown next to the fields, and the audit history."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from tests.console.conftest import AdminServer, signed_in


def _captions(at: AppTest) -> list[str]:
    return [c.value for c in at.caption]


def test_policy_switch_with_field_errors_then_success(
    admin_server: AdminServer, app_test: AppTest
) -> None:
    at = signed_in(app_test, "app_pages/policy.py")
    assert not at.exception, at.exception
    assert at.subheader[0].value.startswith("Active policy: ")

    at.selectbox(key="policy_name").select("exfairs").run()
    at.number_input(key="policy_exfairs_alpha").set_value(1.5)
    at.button(key="policy_submit").click().run()
    at.button(key="policy_confirm").click().run()
    assert not at.exception, at.exception
    assert any("'reason'" in c for c in _captions(at)), _captions(at)  # under the reason

    at.text_input(key="policy_reason").input("too many SLO misses")
    at.button(key="policy_submit").click().run()
    at.button(key="policy_confirm").click().run()
    assert any("less than or equal to 1" in c for c in _captions(at)), _captions(at)
    assert at.number_input(key="policy_exfairs_alpha").value == 1.5  # the form keeps its input
    with admin_server.http() as http:
        assert http.get("/admin/knobs").json()["knobs"].get("policy") is None

    at.number_input(key="policy_exfairs_alpha").set_value(0.6)
    at.button(key="policy_submit").click().run()
    at.button(key="policy_confirm").click().run()
    assert not at.exception, at.exception
    assert any("Policy: exfairs" in s.value for s in at.success)
    assert at.subheader[0].value == "Active policy: exfairs"
    with admin_server.http() as http:
        knob = http.get("/admin/knobs").json()["knobs"]["policy"]
        history = http.get("/admin/policy/history").json()["data"]
    assert knob["name"] == "exfairs" and knob["params"]["alpha"] == 0.6
    assert history[0]["actor"] == "console" and history[0]["reason"] == "too many SLO misses"
    audit = at.dataframe[-1].value
    assert "policy.switch" in list(audit["action"])


def test_weight_and_knob_forms(admin_server: AdminServer, app_test: AppTest) -> None:
    with admin_server.http() as http:
        http.post("/admin/tenants", json={"name": "weighty", "reason": "setup"})
    at = signed_in(app_test, "app_pages/policy.py")
    at.selectbox(key="weight_node").select("weighty")
    at.number_input(key="weight_value").set_value(4.0)
    at.text_input(key="weight_reason").input("premium plan")
    at.button(key="weight_submit").click().run()
    at.button(key="weight_confirm").click().run()
    assert not at.exception, at.exception
    assert any("weighty: weight 4" in s.value for s in at.success)

    at.number_input(key="slo_ttft_ms").set_value(-1.0)
    at.text_input(key="slo_reason").input("tighter")
    at.button(key="slo_submit").click().run()
    at.button(key="slo_confirm").click().run()
    assert any("greater than 0" in c for c in _captions(at)), _captions(at)

    at.number_input(key="queue_default").set_value(64)
    at.text_input(key="queue_reason").input("smaller queues")
    at.button(key="queue_submit").click().run()
    at.button(key="queue_confirm").click().run()
    assert not at.exception, at.exception
    with admin_server.http() as http:
        knobs = http.get("/admin/knobs").json()["knobs"]
        tenant = http.get("/admin/tenants/weighty").json()
    assert knobs["weights"]["weighty"] == 4.0 and tenant["weight"] == 4.0
    assert knobs["queue_cap"] == {"default": 64}
    assert "slo_defaults" not in knobs
    actions = list(at.dataframe[-1].value["action"])
    assert "tenant.update" in actions and "knob.set" in actions


def test_auto_is_chosen_like_any_policy(admin_server: AdminServer, app_test: AppTest) -> None:
    at = signed_in(app_test, "app_pages/policy.py")
    at.selectbox(key="policy_name").select("auto").run()
    assert not at.exception, at.exception
    at.text_input(key="policy_reason").input("let the controller choose")
    at.button(key="policy_submit").click().run()
    at.button(key="policy_confirm").click().run()
    assert not at.exception, at.exception
    assert at.subheader[0].value == "Active policy: auto"
    assert any("meta-controller" in i.value for i in at.info)  # no leader in this test
    with admin_server.http() as http:
        knob = http.get("/admin/knobs").json()["knobs"]["policy"]
    assert knob["name"] == "auto" and knob["params"]["selector"] == "rules"


def test_review_shows_the_diff_and_sends_nothing_until_confirmed(
    admin_server: AdminServer, app_test: AppTest
) -> None:
    with admin_server.http() as http:
        http.post("/admin/tenants", json={"name": "reviewed", "reason": "setup"})
    at = signed_in(app_test, "app_pages/policy.py")
    assert "parameter" in at.table[0].value  # the active policy's parameters, as a table
    at.selectbox(key="weight_node").select("reviewed")
    at.number_input(key="weight_value").set_value(2.5)
    at.text_input(key="weight_reason").input("trial")
    at.button(key="weight_submit").click().run()
    diff = next(t.value for t in at.table if "field" in t.value)
    assert diff.to_dict("records") == [{"field": "weight", "current": "1", "new": "2.5"}]
    with admin_server.http() as http:
        assert http.get("/admin/tenants/reviewed").json()["weight"] == 1.0  # not sent yet
    at.button(key="weight_cancel").click().run()
    assert not [t for t in at.table if "field" in t.value]
    at.button(key="weight_submit").click().run()
    at.button(key="weight_confirm").click().run()
    assert not at.exception, at.exception
    with admin_server.http() as http:
        assert http.get("/admin/tenants/reviewed").json()["weight"] == 2.5
    # no scheduler leader in this test: the console says it is waiting for one
    assert any("Waiting for the scheduler leader" in i.value for i in at.info)


def test_viewer_sees_every_change_button_disabled(
    admin_server: AdminServer, app_test: AppTest
) -> None:
    with admin_server.http() as http:
        made = http.post(
            "/admin/operators", json={"name": "vic", "role": "viewer", "reason": "audit"}
        )
    at = app_test
    at.run()
    at.text_input(key="signin_token").input(made.json()["token"])
    at.button[0].click()
    at.run()
    assert any("**vic** (role viewer)" in m.value for m in at.sidebar.markdown)
    at = at.switch_page("app_pages/policy.py").run()
    assert not at.exception, at.exception
    for key in ("policy_submit", "fairness_submit", "slo_submit", "queue_submit"):
        assert at.button(key=key).disabled, key


def test_the_default_cap_and_a_tenant_s_own_cap_are_separate_changes(
    admin_server: AdminServer, app_test: AppTest
) -> None:
    """One form held both: with a tenant left selected, reviewing a new default cleared that
    tenant's own cap (its empty field) and dropped the default edit."""
    with admin_server.http() as http:
        http.post("/admin/tenants", json={"name": "capped", "queue_cap": 7, "reason": "setup"})
    at = signed_in(app_test, "app_pages/policy.py")
    at.selectbox(key="queue_tenant").select("capped").run()
    assert not at.exception, at.exception
    assert at.number_input(key="queue_own").value == 7  # the cap it has, not empty

    at.number_input(key="queue_default").set_value(64)
    at.text_input(key="queue_reason").input("smaller queues")
    at.button(key="queue_submit").click().run()
    at.button(key="queue_confirm").click().run()
    assert not at.exception, at.exception
    with admin_server.http() as http:
        assert http.get("/admin/knobs").json()["knobs"]["queue_cap"] == {"default": 64}
        assert http.get("/admin/tenants/capped").json()["queue_cap"] == 7

    at.number_input(key="queue_own").set_value(9)
    at.text_input(key="queue_tenant_reason").input("a bit more")
    at.button(key="queue_tenant_submit").click().run()
    at.button(key="queue_tenant_confirm").click().run()
    assert not at.exception, at.exception
    with admin_server.http() as http:
        assert http.get("/admin/tenants/capped").json()["queue_cap"] == 9
        assert http.get("/admin/knobs").json()["knobs"]["queue_cap"] == {"default": 64}
