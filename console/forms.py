"""Streamlit form helpers: a widget per params field, and submitting a change so that the
API's per-field errors show next to their fields after the rerun.

A change is submitted once; on success a message is kept for the next run ("flash") and the
page reruns so every table shows the new value; on a 422 the API's field errors are kept
under the form's key and shown beside the fields; other errors are shown plainly.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import streamlit as st

from console.admin_client import AdminApiError
from console.form_specs import FieldSpec, to_json_value
from console.session import field_error, show_error

FLASH = "flash"


def errors_of(form: str) -> dict[str, str]:
    """Field errors the API gave for `form`'s last submission."""
    return dict(st.session_state.get(f"{form}_errors") or {})


def show_flash() -> None:
    message = st.session_state.pop(FLASH, None)
    if message:
        st.success(message)


def submit(form: str, action: Callable[[], Any], success: str) -> None:
    """Run `action` (an API call); remember field errors or a success message; rerun."""
    try:
        action()
    except AdminApiError as exc:
        fields = exc.field_errors() if exc.status == 422 else {}
        if not fields:
            show_error(exc)
            return
        st.session_state[f"{form}_errors"] = fields
        st.session_state[FLASH] = None
    else:
        st.session_state[f"{form}_errors"] = {}
        st.session_state[FLASH] = success
    st.rerun()


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
