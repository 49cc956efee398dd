"""Policy & knobs, in tabs: Policy (the active policy's parameters as a table, the switch form,
α and β), Weights, Admission & placement, Queue & SLO defaults, Controller and Audit.

Every change needs a reason and goes in two steps: "Review" shows the diff (current → new),
"Confirm" sends it; the API validates it (its per-field errors appear next to the fields) and
audits it under the signed-in operator. A policy or weight change then shows when the
scheduler leader has actually applied it (its live view), polled every refresh period."""

from __future__ import annotations

from typing import Any

import streamlit as st

from console import session
from console.admin_client import AdminApiError, AdminClient
from console.applied import policy_applied, weight_applied
from console.controller_views import limits_line, llm_line, switch_rows, timeline_figure
from console.form_specs import audit_frame, field_specs, flat, node_keys, shown
from console.forms import (
    change_button,
    confirm_panel,
    errors_of,
    params_field,
    reason_field,
    review,
    show_flash,
)
from console.session import field_error

SLO_FIELDS = (("ttft_ms", "TTFT (ms)"), ("tpot_ms", "TPOT (ms)"), ("e2e_ms", "End to end (ms)"))
TABS = (
    "Policy",
    "Weights",
    "Admission & placement",
    "Queue & SLO defaults",
    "Controller",
    "Audit",
)


def _plugin_form(
    form: str, catalogue: list[dict[str, Any]], active: dict[str, Any], prefix: str
) -> tuple[str, dict[str, Any], str, bool]:
    """A name selector (outside the form: it decides the fields) and the params form;
    the API names params fields `<prefix><field>` and the name `<prefix minus params.>name`."""
    errors = errors_of(form)
    names = [p["name"] for p in catalogue]
    current = active.get("name") if active.get("name") in names else names[0]
    name = st.selectbox("Name", names, index=names.index(current), key=f"{form}_name")
    field_error(errors, prefix.removesuffix("params.") + "name")
    entry = next(p for p in catalogue if p["name"] == name)
    st.caption(entry["summary"])
    base = active.get("params") if name == active.get("name") else entry["defaults"]
    with st.form(form):
        params = {
            spec.name: params_field(
                spec,
                (base or {}).get(spec.name, spec.default),
                key=f"{form}_{name}_{spec.name}",
                errors=errors,
                param=f"{prefix}{spec.name}",
            )
            for spec in field_specs(entry["params_schema"])
        }
        reason = reason_field(form, errors)
        submitted = change_button("Review", key=f"{form}_submit")
    return name, params, reason, submitted


def controller_section(policy: dict[str, Any]) -> None:
    """With `auto`: the policy the controller runs, its last view and its switch timeline."""
    controller = policy.get("controller")
    if not controller:
        st.info("The meta-controller starts with the scheduler leader's next checkpoint.")
        return
    st.markdown(
        f"The meta-controller (**{controller['selector']}**, every {controller['period_s']:g} s, "
        f"pool {', '.join(controller['pool'])}) runs **{controller['current']}**."
    )
    st.caption(limits_line(controller))
    llm = llm_line(controller)
    if llm:
        st.caption(llm)
    switches = controller.get("switches") or []
    if switches:
        st.plotly_chart(timeline_figure(switches), key="controller_timeline")
        st.dataframe(switch_rows(switches), hide_index=True, key="controller_switches")
    else:
        st.caption("No automatic switch yet.")


def params_table(policy: dict[str, Any]) -> None:
    """The active policy's parameters, one row each, with what each one means."""
    active = policy["active"]
    entry = next((p for p in policy["policies"] if p["name"] == active["name"]), None)
    props = ((entry or {}).get("params_schema") or {}).get("properties") or {}
    rows = [
        {
            "parameter": k,
            "value": shown(v),
            "meaning": str(props.get(k.split(".")[0], {}).get("description") or ""),
        }
        for k, v in flat(active.get("params") or {}, "").items()
        if k != "value"
    ]
    if rows:
        st.table(rows)
    else:
        st.caption("This policy has no parameters.")


def _policy_note() -> None:
    asked = st.session_state.get("policy_watch")
    if asked is None:
        return
    try:
        running = session.client().policy().get("running")
    except AdminApiError:
        running = None
    if policy_applied(asked, running):
        st.success(f"Applied by the scheduler leader: it now runs {asked['name']}.")
    else:
        st.info(f"Waiting for the scheduler leader to apply {asked['name']}…")


def policy_section(api: AdminClient, policy: dict[str, Any]) -> None:
    active = policy["active"]
    st.subheader(f"Active policy: {active['name']}")
    running = policy.get("running") or {}
    if running and running.get("name") != active["name"] and active["name"] != "auto":
        st.info(f"The scheduler leader still runs {running.get('name')!r}; it switches shortly.")
    params_table(policy)
    st.fragment(run_every=session.refresh_seconds())(_policy_note)()
    st.markdown("**Switch policy**")
    name, params, reason, submitted = _plugin_form("policy", policy["policies"], active, "params.")
    if submitted:
        new = {"name": name, "params": params}
        review(
            "policy",
            f"switch the policy to {name}",
            {"name": active["name"], "params": active.get("params") or {}},
            new,
            reason,
            action=lambda: api.switch_policy(name, params, reason),
            success=f"Policy: {name}.",
            watch=new,
        )
    confirm_panel("policy")


def _weight_note() -> None:
    asked = st.session_state.get("weight_watch")
    if asked is None:
        return
    try:
        weights = session.client().state().get("weights")
    except AdminApiError:
        weights = None
    if weight_applied(asked["node"], asked["weight"], weights):
        st.success(f"Applied by the scheduler leader: {asked['node']} weighs {asked['weight']:g}.")
    else:
        st.info(f"Waiting for the scheduler leader to apply {asked['node']}'s new weight…")


def weights_section(api: AdminClient) -> None:
    st.subheader("Weights")
    weights = node_keys(api.hierarchy())
    if not weights:
        st.info("No tenants yet.")
        return
    st.dataframe(
        [{"node": k, "weight": w} for k, w in weights.items()], hide_index=True, key="weights"
    )
    errors = errors_of("weight")
    st.fragment(run_every=session.refresh_seconds())(_weight_note)()
    with st.form("weight"):
        node = st.selectbox(
            "Node (tenant, tenant/app or tenant/app/agent)",
            list(weights),
            key="weight_node",
            placeholder="Type to search…",
        )
        weight = st.number_input("New weight", value=1.0, format="%.4f", key="weight_value")
        field_error(errors, "weight")
        reason = reason_field("weight", errors)
        submitted = change_button("Review weight", key="weight_submit")
    if submitted and node:
        review(
            "weight",
            f"weight of {node}",
            {"weight": weights[node]},
            {"weight": weight},
            reason,
            action=lambda: api.set_weight(node, weight, reason),
            success=f"{node}: weight {weight:g}.",
            watch={"node": node, "weight": weight},
        )
    confirm_panel("weight")


def fairness_section(api: AdminClient, knobs: dict[str, Any], policy: dict[str, Any]) -> None:
    st.subheader("SAFI α and exchange threshold β")
    params = policy["active"]["params"]
    current = {**{"alpha": 0.7, "beta": 0.1}, **(knobs.get("fairness") or {})}
    current = {k: params.get(k, v) for k, v in current.items()}
    errors = errors_of("fairness")
    with st.form("fairness"):
        alpha = st.number_input("α", value=float(current["alpha"]), format="%.3f", key="alpha")
        field_error(errors, "value.alpha")
        beta = st.number_input("β", value=float(current["beta"]), format="%.3f", key="beta")
        field_error(errors, "value.beta")
        reason = reason_field("fairness", errors)
        submitted = change_button("Review α and β", key="fairness_submit")
    if submitted:
        value = {"alpha": alpha, "beta": beta}
        review(
            "fairness",
            "SAFI α and exchange threshold β",
            current,
            value,
            reason,
            action=lambda: api.set_knob("fairness", value, reason),
            success="α and β updated.",
        )
    confirm_panel("fairness")


def slo_section(api: AdminClient, knobs: dict[str, Any]) -> None:
    st.subheader("Default SLOs (when tenant, app and agent set none)")
    current = knobs.get("slo_defaults") or {}
    errors = errors_of("slo")
    with st.form("slo"):
        value: dict[str, float | None] = {}
        for name, label in SLO_FIELDS:
            value[name] = st.number_input(label, value=current.get(name), key=f"slo_{name}")
            field_error(errors, f"value.{name}")
        reason = reason_field("slo", errors)
        submitted = change_button("Review SLO defaults", key="slo_submit")
    if submitted:
        review(
            "slo",
            "default SLOs",
            {name: current.get(name) for name, _ in SLO_FIELDS},
            value,
            reason,
            action=lambda: api.set_knob("slo_defaults", value, reason),
            success="SLO defaults set.",
        )
    confirm_panel("slo")


def queue_section(api: AdminClient, knobs: dict[str, Any]) -> None:
    st.subheader("Queue caps")
    errors = errors_of("queue")
    caps = {t["tenant"]["name"]: t["tenant"].get("queue_cap") for t in api.hierarchy()}
    tenants = list(caps)
    default = int((knobs.get("queue_cap") or {}).get("default", 256))
    with st.form("queue"):
        cap = st.number_input(
            "Default cap (tenants without their own)", value=default, step=1, key="queue_default"
        )
        field_error(errors, "value.default")
        tenant = st.selectbox(
            "…or this tenant's own cap", ["(default cap)", *tenants], key="queue_tenant"
        )
        own = st.number_input(
            "Tenant cap (empty = use the default)", value=None, step=1, key="queue_own"
        )
        field_error(errors, "queue_cap")
        reason = reason_field("queue", errors)
        submitted = change_button("Review queue cap", key="queue_submit")
    if submitted and tenant == "(default cap)":
        value = {"default": cap}
        review(
            "queue",
            "default queue cap",
            {"default": default},
            value,
            reason,
            action=lambda: api.set_knob("queue_cap", value, reason),
            success="Cap set.",
        )
    elif submitted and tenant:
        change = {"queue_cap": None if own is None else int(own)}
        review(
            "queue",
            f"{tenant}'s queue cap",
            {"queue_cap": caps.get(tenant)},
            change,
            reason,
            action=lambda: api.update_tenant(tenant, change, reason),
            success=f"{tenant}: cap set.",
        )
    confirm_panel("queue")


def plugin_section(api: AdminClient, policy: dict[str, Any], knob: str) -> None:
    """The admission or placement plug-in (`knob`) and its params."""
    st.subheader("Admission bounds" if knob == "admission" else "Placement")
    default = "capacity" if knob == "admission" else policy[f"{knob}s"][0]["name"]
    active = policy.get(knob) or {"name": default, "params": {}}
    name, params, reason, submitted = _plugin_form(
        knob, policy[f"{knob}s"], active, "value.params."
    )
    if submitted:
        value = {"name": name, "params": params}
        review(
            knob,
            f"{knob} plug-in",
            active,
            value,
            reason,
            action=lambda: api.set_knob(knob, value, reason),
            success=f"{knob.capitalize()} set.",
        )
    confirm_panel(knob)


def main() -> None:
    st.title("Policy & knobs")
    show_flash()
    api = session.client()
    try:
        policy, knobs = api.policy(), api.knobs()["knobs"]
    except AdminApiError as exc:
        session.show_error(exc)
        return
    tabs = dict(zip(TABS, st.tabs(TABS, key="policy_tab", on_change="rerun"), strict=True))
    try:
        with tabs["Policy"]:
            policy_section(api, policy)
            fairness_section(api, knobs, policy)
        with tabs["Weights"]:
            weights_section(api)
        with tabs["Admission & placement"]:
            plugin_section(api, policy, "admission")
            plugin_section(api, policy, "placement")
        with tabs["Queue & SLO defaults"]:
            queue_section(api, knobs)
            slo_section(api, knobs)
        with tabs["Controller"]:
            controller_section(policy)
        with tabs["Audit"]:
            st.dataframe(audit_frame(api.audit(limit=200)), hide_index=True, key="audit")
    except AdminApiError as exc:
        session.show_error(exc)


main()
