"""Streamlit form helpers: a widget per params field, and submitting a change so that the
API's per-field errors show next to their fields after the rerun.

A change goes in two steps: the form's button ("Review …") keeps the change and its diff
(current → new, per field) for `confirm_panel`, whose "Confirm" sends it once. On success a
message is kept for the next run ("flash") and the page reruns so every table shows the new
value; on a 422 the API's field errors are kept under the form's key and shown beside the
fields; a 409 `knob_changed` or `node_changed` (the knob or the node changed since the review's
read) keeps the change under `<form>_conflict` for the form to review again over the value
read now (`knob_forms.py`, the weights form);
other errors are shown plainly. Viewers see every change button disabled.

Streamlit keeps a keyed widget's own state and ignores a changed `value=`: every widget that
shows a value in force takes its key from `synced`, which drops that state when the value in
force changed (here or elsewhere), so the widget shows the new value.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import streamlit as st

from console import session
from console.admin_client import AdminApiError
from console.form_specs import FieldSpec, diff_rows, field_specs, to_json_value
from console.session import field_error, show_error

FLASH = "flash"
FLASH_WARNINGS = "flash_warnings"
SEEN = "__seen"
KNOB_CHANGED = "knob_changed"
CHANGED_CODES = frozenset({KNOB_CHANGED, "node_changed"})
"""409 codes for a change refused because what it was decided on changed (a knob, a node)."""


@dataclass(frozen=True, slots=True)
class Pending:
    """A reviewed change waiting for "Confirm": what it alters, the call, the success text
    and, when the leader's live view will show it, what to watch for (`watch`)."""

    what: str
    rows: list[dict[str, str]]
    reason: str
    action: Callable[[], Any]
    success: str
    watch: Any = None
    new: Any = None
    """The value asked for (reviewed again over a fresh read after a conflict)."""
    note: str | None = None
    """Shown above the diff (why the change is reviewed again)."""


def errors_of(form: str) -> dict[str, str]:
    """Field errors the API gave for `form`'s last submission."""
    return dict(st.session_state.get(f"{form}_errors") or {})


def show_flash() -> None:
    """The last change's success message, then every warning the API gave with it."""
    message = st.session_state.pop(FLASH, None)
    if message:
        st.success(message)
    for warning in st.session_state.pop(FLASH_WARNINGS, None) or ():
        st.warning(f"The admin API made the change with a warning: {warning}")


def warnings_of(answer: Any) -> list[str]:
    """The `warnings` of a change's answer: what it did not do although it answered 200 (e.g.
    the scheduler or the other gateways were not told, Redis being unavailable)."""
    found = answer.get("warnings") if isinstance(answer, dict) else None
    return [str(w) for w in found] if isinstance(found, list) else []


def synced(key: str, shown: Any) -> str:
    """`key`, for a widget showing `shown` (the value in force, or anything that decides what
    the widget shows): when `shown` changed since the last run, the widget's kept state is
    dropped so that it shows its new `value=`; an edit over an unchanged value is kept."""
    seen = key + SEEN
    if seen in st.session_state and st.session_state[seen] != shown:
        st.session_state.pop(key, None)
    st.session_state[seen] = shown
    return key


def submit(form: str, pending: Pending) -> None:
    """Send `pending`; remember field errors or a success message with the answer's warnings
    (and, if given and nothing was left undone, what the leader's live view should come to
    show: `<form>_watch`), or a knob changed meanwhile (`<form>_conflict`); rerun."""
    try:
        answer = pending.action()
    except AdminApiError as exc:
        if exc.status == 409 and exc.code in CHANGED_CODES:
            st.session_state[f"{form}_conflict"] = pending
            st.session_state[f"{form}_errors"] = {}
            st.rerun()
        fields = exc.field_errors() if exc.status == 422 else {}
        if not fields:
            show_error(exc)
            return
        st.session_state[f"{form}_errors"] = fields
        st.session_state[FLASH] = None
    else:
        warnings = warnings_of(answer)
        st.session_state[f"{form}_errors"] = {}
        st.session_state[FLASH] = pending.success
        st.session_state[FLASH_WARNINGS] = warnings
        if pending.watch is not None and not warnings:  # not told: it would wait for ever
            st.session_state[f"{form}_watch"] = pending.watch
    st.rerun()


def change_button(label: str, key: str) -> bool:
    """A form's submit button, disabled (with a note) for a viewer."""
    allowed = session.can_change()
    pressed = st.form_submit_button(label, key=key, disabled=not allowed)
    if not allowed:
        st.caption("Your role (viewer) cannot change this.")
    return pressed


def review(form: str, what: str, old: Any, new: Any, reason: str, **call: Any) -> None:
    """Keep a change for confirmation (`call`: action, success and optionally watch)."""
    keep(form, Pending(what, diff_rows(old, new), reason, new=new, **call))


def keep(form: str, pending: Pending, *, rerun: bool = True) -> None:
    """Keep `pending` for `confirm_panel` (then rerun, unless the panel is yet to be drawn)."""
    st.session_state[f"{form}_pending"] = pending
    st.session_state[f"{form}_errors"] = {}
    if rerun:
        st.rerun()


def confirm_panel(form: str) -> None:
    """The diff of the change under review, then "Confirm" (send it) or "Cancel"."""
    pending: Pending | None = st.session_state.get(f"{form}_pending")
    if pending is None:
        return
    with st.container(border=True, key=f"{form}_review"):
        st.markdown(f"**Review: {pending.what}**")
        if pending.note:
            st.warning(pending.note)
        if pending.rows:
            st.table(pending.rows)
        else:
            st.caption("No field changes: this re-applies the current values.")
        st.caption(f"Reason: {pending.reason or '(none — the API will ask for one)'}")
        left, right = st.columns(2)
        confirmed = left.button("Confirm", key=f"{form}_confirm", type="primary")
        cancelled = right.button("Cancel", key=f"{form}_cancel")
    if cancelled:
        st.session_state.pop(f"{form}_pending", None)
        st.rerun()
    if confirmed:
        st.session_state.pop(f"{form}_pending", None)
        submit(form, pending)


def _bounds(spec: FieldSpec) -> str:
    low = "" if spec.minimum is None else f"min {spec.minimum:g}"
    high = "" if spec.maximum is None else f"max {spec.maximum:g}"
    return ", ".join(p for p in (low, high) if p)


def params_field(
    spec: FieldSpec, current: Any, *, key: str, errors: dict[str, str], param: str
) -> Any:
    """One widget for `spec` (bounds are shown, and checked by the API), then its error."""
    help_text = " — ".join(p for p in (spec.help, _bounds(spec)) if p) or None
    raw: Any
    if spec.kind == "boolean":
        raw = st.checkbox(spec.name, value=bool(current), key=key, help=help_text)
    elif spec.kind == "enum":
        options = list(spec.options) + ([None] if spec.nullable else [])
        index = options.index(current) if current in options else 0
        raw = st.selectbox(spec.name, options, index=index, key=key, help=help_text)
    elif spec.kind in ("integer", "number"):
        integer = spec.kind == "integer"
        value = None if current is None else (int(current) if integer else float(current))
        raw = st.number_input(
            spec.name,
            value=value,
            step=1 if integer else None,
            format="%d" if integer else "%.4f",
            key=key,
            help=help_text,
        )
    elif spec.kind == "text":
        raw = st.text_input(spec.name, value="" if current is None else str(current), key=key)
    else:
        raw = st.text_area(spec.name, value=json.dumps(current), key=key, help=help_text)
    field_error(errors, param)
    try:
        return to_json_value(spec, raw)
    except ValueError as exc:  # the API will refuse it with its own message
        st.caption(f":red[{exc}]")
        return raw


def reason_field(form: str, errors: dict[str, str]) -> str:
    """The required reason of a change (kept in the audit log)."""
    reason = st.text_input("Reason (required, kept in the audit log)", key=f"{form}_reason")
    field_error(errors, "reason")
    return str(reason)


def plugin_form(
    form: str, catalogue: list[dict[str, Any]], active: dict[str, Any], prefix: str
) -> tuple[str, dict[str, Any], str, bool]:
    """A name selector (outside the form: it decides the fields) and the params form, both
    showing what is in force (`synced`); the API names params fields `<prefix><field>` and
    the name `<prefix minus params.>name`."""
    errors = errors_of(form)
    names = [p["name"] for p in catalogue]
    current = active.get("name") if active.get("name") in names else names[0]
    key = synced(f"{form}_name", current)
    name = st.selectbox("Name", names, index=names.index(current), key=key)
    field_error(errors, prefix.removesuffix("params.") + "name")
    entry = next(p for p in catalogue if p["name"] == name)
    st.caption(entry["summary"])
    base = (active.get("params") if name == active.get("name") else entry["defaults"]) or {}
    with st.form(form):
        params = {}
        for spec in field_specs(entry["params_schema"]):
            shown = base.get(spec.name, spec.default)
            params[spec.name] = params_field(
                spec,
                shown,
                key=synced(f"{form}_{name}_{spec.name}", shown),
                errors=errors,
                param=f"{prefix}{spec.name}",
            )
        reason = reason_field(form, errors)
        submitted = change_button("Review", key=f"{form}_submit")
    return name, params, reason, submitted
