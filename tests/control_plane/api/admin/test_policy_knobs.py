"""Policy switch (validated, published as a knob, audited) and the generic knobs."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from control_plane.api.app import create_app
from control_plane.contracts.knobs import PLUGIN_NAME_MAX, Fairness, Other, PluginChoice
from control_plane.settings import Settings
from tests.control_plane.api.admin.conftest import AdminApi


async def test_policy_catalogue_and_default(api: AdminApi) -> None:
    resp = await api.client.get("/admin/policy")
    assert resp.status_code == 200
    data = resp.json()
    assert data["active"] == {"name": "vtc", "params": {}}  # settings' default, nothing running
    names = [p["name"] for p in data["policies"]]
    assert {"fcfs", "vtc", "exfairs", "hmfs"} <= set(names)
    exfairs = next(p for p in data["policies"] if p["name"] == "exfairs")
    assert exfairs["params_schema"]["properties"]["alpha"]["maximum"] == 1.0
    assert exfairs["defaults"]["beta"] == 0.1
    assert "capacity" in [a["name"] for a in data["admissions"]]
    assert data["active_runs_as"] == "vtc"
    assert data["running"] is None and data["running_age_s"] is None  # no leader published


async def test_active_runs_as_is_the_name_the_leader_reports(api: AdminApi) -> None:
    """A plug-in named by its module path runs under its class's own name (the leader's live
    view reports that one): `active_runs_as` says which, so a reader can tell it runs."""
    path = "control_plane.policies.fcfs:FcfsPolicy"
    resp = await api.client.put("/admin/policy", json={"name": path, "reason": "r"})
    assert resp.status_code == 200, resp.text
    data = (await api.client.get("/admin/policy")).json()
    assert data["active"]["name"] == path and data["active_runs_as"] == "fcfs"
    resp = await api.client.put("/admin/policy", json={"name": "auto", "reason": "r"})
    assert resp.status_code == 200, resp.text
    assert (await api.client.get("/admin/policy")).json()["active_runs_as"] is None


async def test_invalid_switch_is_refused_field_by_field(api: AdminApi) -> None:
    bad = await api.client.put(
        "/admin/policy",
        json={"name": "exfairs", "params": {"alpha": 2, "p_max": -1, "bogus": 1}, "reason": "r"},
    )
    assert bad.status_code == 422
    params = {e["param"] for e in bad.json()["errors"]}
    assert params == {"params.alpha", "params.p_max", "params.bogus"}
    assert bad.json()["error"]["param"] in params
    unknown = await api.client.put("/admin/policy", json={"name": "nope", "reason": "r"})
    assert unknown.status_code == 422 and unknown.json()["error"]["param"] == "name"
    no_reason = await api.client.put("/admin/policy", json={"name": "fcfs"})
    assert no_reason.status_code == 422 and no_reason.json()["error"]["param"] == "reason"
    assert await api.stores.knobs.get("policy") is None
    assert (await api.client.get("/admin/policy/history")).json()["data"] == []


async def test_switch_sets_the_knob_announces_it_and_audits(api: AdminApi) -> None:
    subscription = await api.stores.knobs.subscribe()
    async with subscription:
        resp = await api.client.put(
            "/admin/policy",
            json={"name": "exfairs", "params": {"alpha": 0.5}, "reason": "SLO misses"},
        )
        assert resp.status_code == 200, resp.text
        change = await asyncio.wait_for(anext(subscription), timeout=5)
    stored = await api.stores.knobs.get("policy")
    assert isinstance(stored, PluginChoice)
    knob = stored.to_json()
    assert stored.name == "exfairs" and stored.params["alpha"] == 0.5
    assert stored.params["beta"] == 0.1  # defaults filled in
    assert change.name == "policy" and change.value == stored
    history = (await api.client.get("/admin/policy/history")).json()["data"]
    assert len(history) == 1
    row = history[0]
    assert (row["actor"], row["reason"], row["target"]) == ("ops@test", "SLO misses", "policy")
    assert row["old"] == {"name": "vtc", "params": {}} and row["new"] == knob
    assert (await api.client.get("/admin/policy")).json()["active"] == knob

    await api.client.put("/admin/policy", json={"name": "fcfs", "reason": "back"})
    history = (await api.client.get("/admin/policy/history")).json()["data"]
    assert [h["new"]["name"] for h in history] == ["fcfs", "exfairs"]
    assert history[0]["old"] == knob


async def test_knobs_validated_set_and_audited(api: AdminApi) -> None:
    listed = (await api.client.get("/admin/knobs")).json()
    assert {"fairness", "admission", "placement", "slo_defaults", "queue_cap"} <= set(
        listed["known"]
    )

    resp = await api.client.put(
        "/admin/knobs/admission",
        json={"value": {"name": "capacity", "params": {"max_concurrency": 4}}, "reason": "protect"},
    )
    assert resp.status_code == 200, resp.text
    admission = await api.stores.knobs.get("admission")
    assert isinstance(admission, PluginChoice)
    assert admission.name == "capacity" and admission.params["max_concurrency"] == 4
    assert admission.params["kv_usage_max"] == 0.95
    stored = admission.to_json()

    cases = [
        (
            "admission",
            {"name": "capacity", "params": {"kv_usage_max": 2}},
            "value.params.kv_usage_max",
        ),
        ("admission", {"name": "nope"}, "value.name"),
        ("fairness", {"alpha": 1.5}, "value.alpha"),
        ("slo_defaults", {"ttft_ms": -5}, "value.ttft_ms"),
        ("queue_cap", {"default": 0}, "value.default"),
        ("weights", {"a": 1}, "name"),
        ("directory", 1, "name"),
        ("Bad Name", 1, "name"),
    ]
    for name, value, param in cases:
        bad = await api.client.put(f"/admin/knobs/{name}", json={"value": value, "reason": "r"})
        assert bad.status_code == 422, (name, bad.text)
        assert bad.json()["error"]["param"] == param, bad.json()

    custom = await api.client.put("/admin/knobs/my.plugin", json={"value": [1, 2], "reason": "r"})
    assert custom.status_code == 200 and await api.stores.knobs.get("my.plugin") == Other([1, 2])
    audit = (await api.client.get("/admin/audit", params={"action": "knob.set"})).json()["data"]
    assert [a["target"] for a in audit] == ["knob:my.plugin", "knob:admission"]
    assert audit[1]["new"] == stored and audit[1]["old"] is None


async def test_fairness_knob_reaches_exfairs_params(api: AdminApi) -> None:
    await api.client.put("/admin/policy", json={"name": "exfairs", "reason": "r"})
    resp = await api.client.put(
        "/admin/knobs/fairness", json={"value": {"alpha": 0.9, "beta": 0.2}, "reason": "tune"}
    )
    assert resp.status_code == 200, resp.text
    assert await api.stores.knobs.get("fairness") == Fairness(0.9, 0.2)
    policy = await api.stores.knobs.get("policy")
    assert isinstance(policy, PluginChoice)
    assert (policy.params["alpha"], policy.params["beta"]) == (0.9, 0.2)
    history = (await api.client.get("/admin/policy/history")).json()["data"]
    assert history[0]["reason"] == "fairness knob: tune"

    await api.client.put("/admin/policy", json={"name": "fcfs", "reason": "r"})
    resp = await api.client.put(
        "/admin/knobs/fairness", json={"value": {"alpha": 0.6}, "reason": "r"}
    )
    assert resp.json()["policy"] is None  # fcfs has no α: only the knob changes
    assert getattr(await api.stores.knobs.get("policy"), "name", None) == "fcfs"
    assert resp.json()["warnings"] == [
        "the policy in force, 'fcfs', takes no alpha or beta: scheduling is unchanged; the "
        "knob sets the α and β of the live fairness view (SAFI) only"
    ]


async def test_a_fairness_change_under_auto_is_stored_for_the_leader(api: AdminApi) -> None:
    """Under `auto` the leader gives α and β to the policies its controller builds: the knob
    alone is stored (no carry into `auto`'s own params), without a warning."""
    await api.client.put("/admin/policy", json={"name": "auto", "reason": "r"})
    resp = await api.client.put(
        "/admin/knobs/fairness", json={"value": {"alpha": 0.9, "beta": 0.2}, "reason": "r"}
    )
    assert resp.status_code == 200 and resp.json()["policy"] is None, resp.text
    assert "warnings" not in resp.json()
    assert await api.stores.knobs.get("fairness") == Fairness(0.9, 0.2)
    assert getattr(await api.stores.knobs.get("policy"), "name", None) == "auto"


async def test_a_fairness_change_and_its_carry_land_together_or_not_at_all(
    api: AdminApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: the `fairness` knob was stored first and the policy params it carries
    after; a switch between the two (another operator's) refused the carry with 409 while the
    knob stayed changed — a half-made change the answer called refused. Now both are stored
    in one step, with an audit row each, or neither."""
    await api.client.put("/admin/policy", json={"name": "exfairs", "reason": "r"})
    knobs = api.stores.knobs
    read = knobs.read
    switched: list[int] = []

    async def racing(name: str) -> tuple[object, str]:
        seen = await read(name)
        if name == "policy" and not switched:  # someone switches right after this read
            other = PluginChoice("exfairs", {"alpha": 0.3, "beta": 0.1})
            switched.append(await knobs.set("policy", other))
        return seen

    monkeypatch.setattr(knobs, "read", racing)
    value = {"alpha": 0.9, "beta": 0.2}
    resp = await api.client.put("/admin/knobs/fairness", json={"value": value, "reason": "t"})
    assert switched and resp.status_code == 409, resp.text
    assert resp.json()["error"]["code"] == "knob_changed"
    assert await knobs.get("fairness") is None  # not stored without its carry
    assert await knobs.get("policy") == PluginChoice("exfairs", {"alpha": 0.3, "beta": 0.1})
    assert (await api.client.get("/admin/audit", params={"action": "knob.set"})).json()[
        "data"
    ] == []

    await api.client.put("/admin/policy", json={"name": "exfairs", "reason": "r"})
    resp = await api.client.put("/admin/knobs/fairness", json={"value": value, "reason": "t"})
    assert resp.status_code == 200, resp.text
    audit = (await api.client.get("/admin/audit")).json()["data"]
    assert [(a["action"], a["target"]) for a in audit[:2]] == [
        ("policy.switch", "policy"),
        ("knob.set", "knob:fairness"),
    ]
    assert resp.json()["version"] == await knobs.version()


async def test_auto_is_offered_validated_and_set_like_a_policy(api: AdminApi) -> None:
    catalogue = (await api.client.get("/admin/policy")).json()["policies"]
    auto = next(p for p in catalogue if p["name"] == "auto")
    assert auto["defaults"]["selector"] == "rules" and "edf" in auto["defaults"]["pool"]
    bad = await api.client.put(
        "/admin/policy",
        json={"name": "auto", "params": {"selector": "oracle", "period_s": 0}, "reason": "r"},
    )
    assert bad.status_code == 422
    assert {e["param"] for e in bad.json()["errors"]} == {"params.selector", "params.period_s"}
    unknown = await api.client.put(
        "/admin/policy", json={"name": "auto", "params": {"pool": ["fcfs", "nope"]}, "reason": "r"}
    )
    assert unknown.status_code == 422 and unknown.json()["error"]["param"] == "params.pool"
    ok = await api.client.put(
        "/admin/policy", json={"name": "auto", "params": {"selector": "bandit"}, "reason": "r"}
    )
    assert ok.status_code == 200
    knob = await api.stores.knobs.get("policy")
    assert isinstance(knob, PluginChoice) and knob.name == "auto"
    assert knob.params["selector"] == "bandit" and knob.params["period_s"] == 30.0


async def test_a_change_decided_on_a_stale_read_is_refused(api: AdminApi) -> None:
    """`expected` (the knob's stored text as `GET /admin/knobs` gave it) makes a change a
    compare-and-set: another operator's change since that read wins with a 409."""
    listed = (await api.client.get("/admin/knobs")).json()
    assert listed["expected"]["queue_cap"] == ""  # unset, and known: '' is what to send
    first = await api.client.put(
        "/admin/knobs/queue_cap", json={"value": {"default": 64}, "reason": "r", "expected": ""}
    )
    assert first.status_code == 200, first.text
    seen = (await api.client.get("/admin/knobs")).json()
    assert seen["knobs"]["queue_cap"] == {"default": 64}
    assert seen["expected"]["queue_cap"] == (await api.stores.knobs.read("queue_cap"))[1]

    other = {"value": {"default": 32}, "reason": "someone else"}
    assert (await api.client.put("/admin/knobs/queue_cap", json=other)).status_code == 200
    mine = {"value": {"default": 128}, "reason": "mine", "expected": seen["expected"]["queue_cap"]}
    stale = await api.client.put("/admin/knobs/queue_cap", json=mine)
    assert stale.status_code == 409, stale.text
    assert stale.json()["error"]["code"] == "knob_changed"
    assert (await api.client.get("/admin/knobs")).json()["knobs"]["queue_cap"] == {"default": 32}
    audit = (await api.client.get("/admin/audit", params={"action": "knob.set"})).json()["data"]
    assert [a["reason"] for a in audit] == ["someone else", "r"]  # no row for the refused one

    fresh = (await api.client.get("/admin/knobs")).json()["expected"]["queue_cap"]
    retried = await api.client.put("/admin/knobs/queue_cap", json={**mine, "expected": fresh})
    assert retried.status_code == 200 and retried.json()["value"] == {"default": 128}
    bad = await api.client.put("/admin/knobs/queue_cap", json={**mine, "expected": 3})
    assert bad.status_code == 422 and bad.json()["error"]["param"] == "expected"


async def test_a_switch_decided_on_a_stale_read_of_the_policy_is_refused(api: AdminApi) -> None:
    """`expected` from `GET /admin/policy` makes a switch a compare-and-set, as for any knob:
    another operator's switch since that read wins with a 409 and no audit row."""
    seen = (await api.client.get("/admin/policy")).json()
    assert seen["expected"] == ""  # no policy knob yet: '' is what to send
    first = {"name": "fcfs", "reason": "first", "expected": ""}
    assert (await api.client.put("/admin/policy", json=first)).status_code == 200
    seen = (await api.client.get("/admin/policy")).json()
    assert seen["active"]["name"] == "fcfs"
    assert seen["expected"] == (await api.stores.knobs.read("policy"))[1] != ""

    other = {"name": "edf", "reason": "someone else"}
    assert (await api.client.put("/admin/policy", json=other)).status_code == 200
    mine = {"name": "sjf", "reason": "mine", "expected": seen["expected"]}
    stale = await api.client.put("/admin/policy", json=mine)
    assert stale.status_code == 409, stale.text
    assert stale.json()["error"]["code"] == "knob_changed"
    assert (await api.client.get("/admin/policy")).json()["active"]["name"] == "edf"
    history = (await api.client.get("/admin/policy/history")).json()["data"]
    assert [h["reason"] for h in history] == ["someone else", "first"]

    fresh = (await api.client.get("/admin/policy")).json()["expected"]
    retried = await api.client.put("/admin/policy", json={**mine, "expected": fresh})
    assert retried.status_code == 200 and retried.json()["active"]["name"] == "sjf"


def test_the_openapi_document_names_the_knob_conflict() -> None:
    spec = create_app(Settings(admin_token="t")).openapi()
    put = spec["paths"]["/admin/knobs/{name}"]["put"]
    assert "knob_changed" in put["responses"]["409"]["description"]
    ref = put["responses"]["409"]["content"]["application/json"]["schema"]["$ref"]
    assert ref.endswith("/AdminError")
    for path, schema in (("/admin/knobs/{name}", "KnobChange"), ("/admin/policy", "PolicyChange")):
        put = spec["paths"][path]["put"]
        assert "knob_changed" in put["responses"]["409"]["description"], path
        body = spec["components"]["schemas"][schema]["properties"]
        assert "expected" in body and "knob_changed" in body["expected"]["description"]


_LONG_MODULE = "m" + "_" * 150 + "long_admission_module"


@pytest.fixture
def long_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """An importable `module:Class` admission whose path is longer than PLUGIN_NAME_MAX."""
    (tmp_path / f"{_LONG_MODULE}.py").write_text(
        "from control_plane.admission.capacity import CapacityAdmission\n"
        f"class {'C' * 60}(CapacityAdmission):\n    pass\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield f"{_LONG_MODULE}:{'C' * 60}"
    sys.modules.pop(_LONG_MODULE, None)


async def test_a_plugin_knob_name_past_the_rule_is_a_422_not_a_500(
    api: AdminApi, long_plugin: str
) -> None:
    # it imports, so only the length rule can refuse it; the knob's readers would not take it
    assert len(long_plugin) > PLUGIN_NAME_MAX
    resp = await api.client.put(
        "/admin/knobs/admission", json={"value": {"name": long_plugin}, "reason": "r"}
    )
    assert resp.status_code == 422, resp.text
    assert resp.json()["error"]["param"] == "value.name"
    assert await api.stores.knobs.get("admission") is None


async def test_knobs_say_what_an_unset_queue_cap_falls_back_to(api: AdminApi) -> None:
    """While `queue_cap` is unset, gateways cap tenants without their own at their settings'
    `default_queue_cap`: the console shows that number, not a constant of its own."""
    data = (await api.client.get("/admin/knobs")).json()
    assert "queue_cap" not in data["knobs"]
    settings = api.app.state.settings
    assert data["fallbacks"] == {"queue_cap": {"default": settings.default_queue_cap}}
