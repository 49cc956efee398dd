"""Policy & knobs: the active policy and its params; forms for the policy, per-node weights,
α and β, SLO defaults, queue caps and admission bounds. Every change needs a reason, the API
validates it (its per-field errors appear next to the fields) and audits it; the audit
history is at the bottom."""

from __future__ import annotations

from typing import Any

import streamlit as st

from console import session
from console.admin_client import AdminApiError, AdminClient
from console.controller_views import limits_line, llm_line, switch_rows, timeline_figure
from console.form_specs import audit_frame, field_specs, node_keys
from console.forms import errors_of, params_field, reason_field, show_flash, submit
from console.session import field_error

SLO_FIELDS = (("ttft_ms", "TTFT (ms)"), ("tpot_ms", "TPOT (ms)"), ("e2e_ms", "End to end (ms)"))


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
        submitted = st.form_submit_button("Apply", key=f"{form}_submit")
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


def policy_section(api: AdminClient, policy: dict[str, Any]) -> None:
    active = policy["active"]
    st.subheader(f"Active policy: {active['name']}")
    running = policy.get("running") or {}
    if active["name"] == "auto":
        controller_section(policy)
    elif running and running.get("name") != active["name"]:
        st.info(f"The scheduler leader still runs {running.get('name')!r}; it switches shortly.")
    st.json(active["params"], expanded=False)
    name, params, reason, submitted = _plugin_form("policy", policy["policies"], active, "params.")
    if submitted:
        submit("policy", lambda: api.switch_policy(name, params, reason), f"Policy: {name}.")


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
    with st.form("weight"):
        node = st.selectbox(
            "Node (tenant, tenant/app or tenant/app/agent)", list(weights), key="weight_node"
        )
        weight = st.number_input("New weight", value=1.0, format="%.4f", key="weight_value")
        field_error(errors, "weight")
        reason = reason_field("weight", errors)
        submitted = st.form_submit_button("Set weight", key="weight_submit")
    if submitted and node:
        submit(
            "weight", lambda: api.set_weight(node, weight, reason), f"{node}: weight {weight:g}."
        )


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
        submitted = st.form_submit_button("Set α and β", key="fairness_submit")
    if submitted:
        value = {"alpha": alpha, "beta": beta}
        submit("fairness", lambda: api.set_knob("fairness", value, reason), "α and β updated.")


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
        submitted = st.form_submit_button("Set SLO defaults", key="slo_submit")
    if submitted:
        submit("slo", lambda: api.set_knob("slo_defaults", value, reason), "SLO defaults set.")


def queue_section(api: AdminClient, knobs: dict[str, Any]) -> None:
    st.subheader("Queue caps")
    errors = errors_of("queue")
    tenants = [t["tenant"]["name"] for t in api.hierarchy()]
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
        submitted = st.form_submit_button("Set queue cap", key="queue_submit")
    if not submitted:
        return
    if tenant == "(default cap)":
        submit("queue", lambda: api.set_knob("queue_cap", {"default": cap}, reason), "Cap set.")
    else:
        change = {"queue_cap": None if own is None else int(own)}
        submit("queue", lambda: api.update_tenant(tenant, change, reason), f"{tenant}: cap set.")


def admission_section(api: AdminClient, policy: dict[str, Any]) -> None:
    st.subheader("Admission bounds")
    active = policy.get("admission") or {"name": "capacity", "params": {}}
    name, params, reason, submitted = _plugin_form(
        "admission", policy["admissions"], active, "value.params."
    )
    if submitted:
        value = {"name": name, "params": params}
        submit("admission", lambda: api.set_knob("admission", value, reason), "Admission set.")


def main() -> None:
    st.title("Policy & knobs")
    show_flash()
    api = session.client()
    try:
        policy, knobs = api.policy(), api.knobs()["knobs"]
        policy_section(api, policy)
        weights_section(api)
        fairness_section(api, knobs, policy)
        slo_section(api, knobs)
        queue_section(api, knobs)
        admission_section(api, policy)
        st.subheader("Audit history")
        st.dataframe(audit_frame(api.audit(limit=200)), hide_index=True, key="audit")
    except AdminApiError as exc:
        session.show_error(exc)


main()
