"""The Policy & knobs page's knob forms: SAFI α and β, default SLOs, queue caps, and the
admission and placement plug-ins.

A knob change is made over what the operator reviewed: the page reads `GET /admin/knobs` once
per run, the review's diff is against those values, and "Confirm" sends the knob's stored text
from that same read as `expected`. If the knob changed meanwhile (another operator), the API
refuses it (409 `knob_changed`) and nothing changes; the form then reviews the same change
again against the value read now, with a warning, for the operator to confirm or cancel.
Every widget shows the value in force (`forms.synced`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import streamlit as st

from console.admin_client import AdminClient
from console.form_specs import diff_rows
from console.forms import (
    Pending,
    change_button,
    confirm_panel,
    errors_of,
    keep,
    plugin_form,
    reason_field,
    review,
    synced,
)
from console.session import field_error

SLO_FIELDS = (("ttft_ms", "TTFT (ms)"), ("tpot_ms", "TPOT (ms)"), ("e2e_ms", "End to end (ms)"))
FAIRNESS_DEFAULTS = {"alpha": 0.7, "beta": 0.1}
DEFAULT_QUEUE_CAP = 256
CHANGED = (
    "The {what} changed since you reviewed it (another operator?): nothing was sent. Below "
    "is your change against the value in force now: confirm it again, or cancel."
)


@dataclass(frozen=True, slots=True)
class KnobState:
    """One read of `GET /admin/knobs`: the values, and per knob the stored text a change is
    made over (`expected`; none from an API that does not give it: no check then)."""

    values: dict[str, Any]
    expected: dict[str, str]
    fallbacks: dict[str, Any]
    """What gateways use while a knob is unset (their settings), per knob."""

    @classmethod
    def of(cls, answer: Mapping[str, Any]) -> KnobState:
        return cls(
            dict(answer.get("knobs") or {}),
            dict(answer.get("expected") or {}),
            dict(answer.get("fallbacks") or {}),
        )


@dataclass(frozen=True, slots=True)
class KnobForm:
    """One knob's change: reviewed over the knob as `knobs` read it, and reviewed again over
    a fresh read after a 409 `knob_changed` (`again`)."""

    api: AdminClient
    knobs: KnobState
    form: str
    knob: str
    what: str
    success: str

    def review(
        self, old: Any, new: Any, reason: str, *, note: str | None = None, rerun: bool = True
    ) -> None:
        """Keep the change `old` → `new` for confirmation, sent over this read's value."""
        api, knob, expected = self.api, self.knob, self.knobs.expected.get(self.knob)
        pending = Pending(
            self.what,
            diff_rows(old, new),
            reason,
            action=lambda: api.set_knob(knob, new, reason, expected=expected),
            success=self.success,
            new=new,
            note=note,
        )
        keep(self.form, pending, rerun=rerun)

    def again(self, old: Any) -> None:
        """After a conflict: the refused change, reviewed against `old` (read now)."""
        refused: Pending | None = st.session_state.pop(f"{self.form}_conflict", None)
        if refused is not None:
            note = CHANGED.format(what=self.what)
            self.review(old, refused.new, refused.reason, note=note, rerun=False)


def fairness_section(api: AdminClient, knobs: KnobState, policy: dict[str, Any]) -> None:
    st.subheader("SAFI α and exchange threshold β")
    params = policy["active"]["params"]
    knob = {k: v for k, v in (knobs.values.get("fairness") or {}).items() if v is not None}
    current = {k: params.get(k, v) for k, v in {**FAIRNESS_DEFAULTS, **knob}.items()}
    errors = errors_of("fairness")
    with st.form("fairness"):
        alpha = st.number_input(
            "α", value=float(current["alpha"]), format="%.3f", key=synced("alpha", current["alpha"])
        )
        field_error(errors, "value.alpha")
        beta = st.number_input(
            "β", value=float(current["beta"]), format="%.3f", key=synced("beta", current["beta"])
        )
        field_error(errors, "value.beta")
        reason = reason_field("fairness", errors)
        submitted = change_button("Review α and β", key="fairness_submit")
    change = KnobForm(
        api, knobs, "fairness", "fairness", "SAFI α and exchange threshold β", "α and β updated."
    )
    if submitted:
        change.review(current, {"alpha": alpha, "beta": beta}, reason)
    change.again(current)
    confirm_panel("fairness")


def slo_section(api: AdminClient, knobs: KnobState) -> None:
    st.subheader("Default SLOs (when tenant, app and agent set none)")
    knob = knobs.values.get("slo_defaults") or {}
    current = {name: knob.get(name) for name, _ in SLO_FIELDS}
    errors = errors_of("slo")
    with st.form("slo"):
        value: dict[str, float | None] = {}
        for name, label in SLO_FIELDS:
            key = synced(f"slo_{name}", current[name])
            value[name] = st.number_input(label, value=current[name], key=key)
            field_error(errors, f"value.{name}")
        reason = reason_field("slo", errors)
        submitted = change_button("Review SLO defaults", key="slo_submit")
    change = KnobForm(api, knobs, "slo", "slo_defaults", "default SLOs", "SLO defaults set.")
    if submitted:
        change.review(current, value, reason)
    change.again(current)
    confirm_panel("slo")


def queue_section(api: AdminClient, knobs: KnobState) -> None:
    """The default queue cap (a knob) and, in a form of its own, one tenant's own cap: one
    review never changes both (a tenant left selected had its cap cleared by a default edit)."""
    st.subheader("Queue caps")
    errors = errors_of("queue")
    knob = knobs.values.get("queue_cap") or {}
    fallback = (knobs.fallbacks.get("queue_cap") or {}).get("default")
    default = int(knob.get("default") or fallback or DEFAULT_QUEUE_CAP)
    if knob.get("default") is None:
        value = f"{default}" if fallback is not None else f"{default} unless it sets another"
        st.caption(
            "Not set: tenants without their own cap get the gateway's "
            f"ARBITER_DEFAULT_QUEUE_CAP ({value})."
        )
    with st.form("queue"):
        cap = st.number_input(
            "Default cap (tenants without their own)",
            value=default,
            step=1,
            key=synced("queue_default", default),
        )
        field_error(errors, "value.default")
        reason = reason_field("queue", errors)
        submitted = change_button("Review default cap", key="queue_submit")
    change = KnobForm(api, knobs, "queue", "queue_cap", "default queue cap", "Cap set.")
    if submitted:
        change.review({"default": default}, {"default": cap}, reason)
    change.again({"default": default})
    confirm_panel("queue")
    _tenant_cap(api)


def _tenant_cap(api: AdminClient) -> None:
    """One tenant's own cap, prefilled with the cap it has (empty: it uses the default)."""
    caps = {t["tenant"]["name"]: t["tenant"].get("queue_cap") for t in api.hierarchy()}
    tenant = st.selectbox("A tenant's own cap", list(caps), index=None, key="queue_tenant")
    if not tenant:
        return
    errors = errors_of("queue_tenant")
    current = caps.get(tenant)
    with st.form("queue_tenant_form"):
        own = st.number_input(
            f"{tenant}'s cap (empty = use the default)",
            value=current,
            step=1,
            key=synced("queue_own", (tenant, current)),
        )
        field_error(errors, "queue_cap")
        reason = reason_field("queue_tenant", errors)
        submitted = change_button("Review tenant cap", key="queue_tenant_submit")
    if submitted:
        new = {"queue_cap": None if own is None else int(own)}
        review(
            "queue_tenant",
            f"{tenant}'s queue cap",
            {"queue_cap": current},
            new,
            reason,
            action=lambda: api.update_tenant(tenant, new, reason),
            success=f"{tenant}: cap set.",
        )
    confirm_panel("queue_tenant")


def plugin_section(api: AdminClient, knobs: KnobState, policy: dict[str, Any], knob: str) -> None:
    """The admission or placement plug-in (`knob`) and its params."""
    st.subheader("Admission bounds" if knob == "admission" else "Placement")
    default = "capacity" if knob == "admission" else policy[f"{knob}s"][0]["name"]
    active = policy.get(knob) or {"name": default, "params": {}}
    name, params, reason, submitted = plugin_form(knob, policy[f"{knob}s"], active, "value.params.")
    change = KnobForm(api, knobs, knob, knob, f"{knob} plug-in", f"{knob.capitalize()} set.")
    if submitted:
        change.review(active, {"name": name, "params": params}, reason)
    change.again(active)
    confirm_panel(knob)
