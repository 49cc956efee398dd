"""Policy & knobs, in tabs: Policy (the active policy's parameters as a table, the switch form,
α and β), Weights, Admission & placement, Queue & SLO defaults, Controller and Audit.

Every change needs a reason and goes in two steps: "Review" shows the diff (current → new),
"Confirm" sends it; the API validates it (its per-field errors appear next to the fields) and
audits it under the signed-in operator. A policy or weight change then shows when the
scheduler leader has actually applied it (its live view; `auto`: once its meta-controller
runs), polled every refresh period — or the error when that cannot be read. A policy switch or
a knob change is refused if the policy or knob changed since the page read it, then reviewed
again over the value in force (`knob_forms.py`); every field shows the value in force, also
after a change made elsewhere."""

from __future__ import annotations

from typing import Any

import streamlit as st

from console import session
from console.admin_client import AdminApiError, AdminClient
from console.applied import STALE_AFTER_S, Note, policy_note, weight_note
from console.controller_views import limits_line, llm_line, switch_frame, timeline_figure
from console.form_specs import audit_frame, diff_rows, flat, node_keys, shown
from console.forms import (
    Pending,
    change_button,
    confirm_panel,
    errors_of,
    keep,
    plugin_form,
    reason_field,
    show_flash,
    synced,
)
from console.knob_forms import (
    CHANGED,
    KnobState,
    fairness_section,
    plugin_section,
    queue_section,
    slo_section,
)
from console.session import field_error

TABS = (
    "Policy",
    "Weights",
    "Admission & placement",
    "Queue & SLO defaults",
    "Controller",
    "Audit",
)


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
        st.dataframe(switch_frame(switches), hide_index=True, key="controller_switches")
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


def _show(note: Note, watch: str) -> None:
    getattr(st, note.kind)(note.text)
    if note.done:  # applied: stop watching (the message shows this once)
        st.session_state.pop(watch, None)


def _policy_note() -> None:
    asked = st.session_state.get("policy_watch")
    if asked is not None:
        _show(policy_note(asked, session.client().policy), "policy_watch")


def _running_note(running: dict[str, Any], runs_as: str, active: str) -> None:
    """Whether the leader runs the active policy yet; a plug-in named by its module path runs
    under the name its class gives itself (`runs_as`)."""
    if running.get("name") != runs_as and active != "auto":
        st.info(f"The scheduler leader still runs {running.get('name')!r}; it switches shortly.")
    elif runs_as != active:
        st.caption(f"The scheduler leader runs it as {runs_as!r} (the name its class gives).")


def policy_section(api: AdminClient, policy: dict[str, Any]) -> None:
    active = policy["active"]
    st.subheader(f"Active policy: {active['name']}")
    running = policy.get("running") or {}
    age = policy.get("running_age_s")
    if running and age is not None and float(age) > STALE_AFTER_S:
        st.error(
            f"The scheduler leader last published {float(age):.0f} s ago: what it runs (below "
            "and under Controller) is from then, not now. Is the scheduler running?"
        )
    errors = policy.get("knob_errors") or {}
    for knob, why in sorted(errors.items()):
        st.error(f"The scheduler leader could not apply the {knob} knob and kept its own: {why}")
    if running and "policy" not in errors:  # else it does not switch: said above
        _running_note(running, policy.get("active_runs_as") or active["name"], active["name"])
    params_table(policy)
    st.fragment(run_every=session.refresh_seconds())(_policy_note)()
    st.markdown("**Switch policy**")
    name, params, reason, submitted = plugin_form("policy", policy["policies"], active, "params.")
    if submitted:
        _review_switch(api, policy, {"name": name, "params": params}, reason)
    refused: Pending | None = st.session_state.pop("policy_conflict", None)
    if refused is not None:  # switched by someone else since the review: review it again
        _review_switch(api, policy, refused.new, refused.reason, CHANGED.format(what="policy"))
    confirm_panel("policy")


def _review_switch(
    api: AdminClient,
    policy: dict[str, Any],
    new: dict[str, Any],
    reason: str,
    note: str | None = None,
) -> None:
    """Keep the switch to `new` for confirmation, sent only over the policy `policy` read
    (`expected`; a 409 `knob_changed` puts it under `policy_conflict`)."""
    active, expected = policy["active"], policy.get("expected")
    name, params = new["name"], new["params"]
    keep(
        "policy",
        Pending(
            f"switch the policy to {name}",
            diff_rows({"name": active["name"], "params": active.get("params") or {}}, new),
            reason,
            action=lambda: api.switch_policy(name, params, reason, expected=expected),
            success=f"Policy: {name}.",
            watch=new,
            new=new,
            note=note,
        ),
        rerun=note is None,
    )


def _weight_note() -> None:
    asked = st.session_state.get("weight_watch")
    if asked is not None:
        _show(weight_note(asked, session.client().state), "weight_watch")


def weights_section(api: AdminClient) -> None:
    st.subheader("Weights")
    weights = node_keys(api.hierarchy())
    refused: Pending | None = st.session_state.pop("weight_conflict", None)
    if refused is not None and refused.new["node"] not in weights:  # deleted meanwhile
        st.warning(f"{refused.new['node']} no longer exists: your weight change was not sent.")
        refused = None
    if not weights:
        st.info("No tenants yet.")
        return
    st.dataframe(
        [{"node": k, "weight": w} for k, w in weights.items()], hide_index=True, key="weights"
    )
    errors = errors_of("weight")
    st.fragment(run_every=session.refresh_seconds())(_weight_note)()
    node = st.selectbox(  # outside the form: the weight field starts at the node's weight
        "Node (tenant, tenant/app or tenant/app/agent)",
        list(weights),
        key="weight_node",
        placeholder="Type to search…",
    )
    current = weights.get(node) if node else None
    with st.form("weight"):
        weight = st.number_input(
            "New weight",
            value=float(current if current is not None else 1.0),
            format="%.4f",
            key=synced("weight_value", (node, current)),
        )
        field_error(errors, "weight")
        reason = reason_field("weight", errors)
        submitted = change_button("Review weight", key="weight_submit")
    if submitted and node:
        _review_weight(api, node, current, weight, reason)
    if refused is not None:  # changed by someone else since the review: review it again
        asked = refused.new
        note = CHANGED.format(what=f"weight of {asked['node']}")
        _review_weight(
            api, asked["node"], weights[asked["node"]], asked["weight"], refused.reason, note
        )
    confirm_panel("weight")


def _review_weight(
    api: AdminClient,
    node: str,
    current: float | None,
    weight: float,
    reason: str,
    note: str | None = None,
) -> None:
    """Keep the change of `node`'s weight for confirmation, sent only over the weight read
    (`expected`; a 409 `node_changed` puts it under `weight_conflict`)."""
    keep(
        "weight",
        Pending(
            f"weight of {node}",
            diff_rows({"weight": current}, {"weight": weight}),
            reason,
            action=lambda: api.set_weight(node, weight, reason, expected=current),
            success=f"{node}: weight {weight:g}.",
            watch={"node": node, "weight": weight},
            new={"node": node, "weight": weight},
            note=note,
        ),
        rerun=note is None,
    )


def main() -> None:
    st.title("Policy & knobs")
    show_flash()
    api = session.client()
    try:
        policy, knobs = api.policy(), KnobState.of(api.knobs())
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
            plugin_section(api, knobs, policy, "admission")
            plugin_section(api, knobs, policy, "placement")
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
