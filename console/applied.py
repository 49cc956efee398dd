"""Has the scheduler leader applied a change yet? (pure: compares what was asked with what
the leader's live view reports; the console polls and shows the answer)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from console import live_views
from console.admin_client import AdminApiError

AUTO = "auto"
"""The policy that hands the choice to the meta-controller: the leader then reports the
concrete policy the controller runs, and its controller (`GET /admin/policy` `controller`)."""
CONTROLLER_FIELDS = ("selector", "pool", "period_s")
"""`auto` params the leader's controller view reports, compared to tell an old controller
from the asked one."""
NO_LIVE_STATE = "no_live_state"
"""The API's code for "no scheduler leader has published yet": still waiting, not an error."""

Fetch = Callable[[], Mapping[str, Any]]


@dataclass(frozen=True, slots=True)
class Note:
    """What to show about a watched change: `kind` (`success`, `info` or `error`, the
    Streamlit call), its text, and `done` (applied: stop watching)."""

    kind: Literal["success", "info", "error"]
    text: str
    done: bool = False


def policy_applied(
    asked: Mapping[str, Any],
    running: Mapping[str, Any] | None,
    controller: Mapping[str, Any] | None = None,
) -> bool:
    """True once the leader runs the asked policy with the asked params (params the leader
    fills in by default are not compared). `auto`: once a controller runs with the asked
    selector, pool and period (whatever policy it chose); any other policy: once it runs and
    no controller is attached any more."""
    params = asked.get("params") or {}
    if asked.get("name") == AUTO:
        if not controller:
            return False
        return all(
            _same(controller[k], params[k])
            for k in CONTROLLER_FIELDS
            if k in params and k in controller
        )
    if controller or not running or running.get("name") != asked.get("name"):
        return False
    have = running.get("params") or {}
    return all(_same(have[k], v) for k, v in params.items() if k in have)


def weight_applied(node: str, weight: float, live_weights: Mapping[str, Any] | None) -> bool:
    """True once the leader's weight table holds `weight` for `node` ('tenant/app/...')."""
    have = (live_weights or {}).get(node)
    return have is not None and _same(have, weight)


STALE_AFTER_S = live_views.STALE_AFTER_S
"""A leader's view older than this is stale: no leader is publishing, so a change cannot be
seen applied however long the page waits."""


def policy_note(asked: Mapping[str, Any], fetch: Fetch) -> Note:
    """The note on a policy switch; `fetch` reads `GET /admin/policy`."""
    name = asked["name"]
    try:
        view = fetch()
    except AdminApiError as exc:
        return _failed(exc, f"{name}")
    if policy_applied(asked, view.get("running"), view.get("controller")):
        runs = "its meta-controller runs" if name == AUTO else "it now runs"
        return Note("success", f"Applied by the scheduler leader: {runs} {name}.", done=True)
    return _stale(view.get("running_age_s"), f"The switch to {name}") or Note(
        "info", f"Waiting for the scheduler leader to apply {name}…"
    )


def weight_note(asked: Mapping[str, Any], fetch: Fetch) -> Note:
    """The note on a weight change; `fetch` reads `GET /admin/state`."""
    node, weight = asked["node"], asked["weight"]
    try:
        state = fetch()
    except AdminApiError as exc:
        return _failed(exc, f"{node}'s new weight")
    if weight_applied(node, weight, state.get("weights")):
        return Note("success", f"Applied by the scheduler leader: {node} weighs {weight:g}.", True)
    return _stale(state.get("age_s"), f"The new weight of {node}") or Note(
        "info", f"Waiting for the scheduler leader to apply {node}'s new weight…"
    )


def _stale(age: Any, what: str) -> Note | None:
    """The note while the leader's view is stale (`STALE_AFTER_S`), else None."""
    if age is None or float(age) <= STALE_AFTER_S:
        return None
    return Note(
        "error",
        f"Not applied yet, and no scheduler leader is publishing: its view is {float(age):.0f} s "
        f"old. {what} is stored and applies once a leader runs: is the scheduler running?",
    )


def _failed(exc: AdminApiError, what: str) -> Note:
    if exc.code == NO_LIVE_STATE:
        return Note("info", f"Waiting for the scheduler leader to apply {what}: {exc.message}")
    return Note("error", f"Cannot tell whether the scheduler leader applied {what}: {exc}")


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, int | float) and isinstance(b, int | float):
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-12)
    return bool(a == b)
