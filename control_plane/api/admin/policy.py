"""`/admin/policy`: the active policy and every registered one with its params schema; a
validated, audited switch; the switch history."""

from __future__ import annotations

import inspect
import time
from typing import Annotated, Any

from fastapi import APIRouter, Query

from control_plane.admin.records import as_json
from control_plane.admission.registry import ADMISSIONS
from control_plane.api.admin.deps import Ctx, in_thread
from control_plane.api.admin.knob_rules import validate_policy
from control_plane.api.admin.knobs import KNOB_CHANGED, active_policy, set_knob
from control_plane.api.admin.plugin_guard import refuse_imports
from control_plane.api.admin.schemas import PolicyChange
from control_plane.api.auth import Admin, Caller
from control_plane.contracts.knobs import JsonValue, KnobValue
from control_plane.control.meta import AUTO, AutoParams
from control_plane.core.plugins import PluginRegistry
from control_plane.placement.registry import PLACEMENTS
from control_plane.policies import registry
from storage.db import Database
from storage.records import AuditRecord

router = APIRouter(tags=["admin: policy"])


def _summary(cls: type) -> str:
    doc = inspect.getdoc(cls) or ""
    return doc.split("\n\n")[0].replace("\n", " ")


def _entry(name: str, cls: Any) -> dict[str, Any]:
    return {
        "name": name,
        "summary": _summary(cls),
        "params_schema": cls.Params.model_json_schema(),
        "defaults": cls.Params().model_dump(mode="json"),
    }


def policy_catalog() -> list[dict[str, Any]]:
    """Every registered policy: name, summary, params JSON schema and default params; then
    `auto`, which hands the choice to the meta-controller."""
    entries = [_entry(name, registry.policy_class(name)) for name in registry.names()]
    entries.append(
        {
            "name": AUTO,
            "summary": "The H-MAS meta-controller chooses the policy from the pool every period,"
            " with an emergency bypass and a rollback guard (docs/algorithms.md §18).",
            "params_schema": AutoParams.model_json_schema(),
            "defaults": AutoParams().model_dump(mode="json"),
        }
    )
    return entries


def plugin_catalog(plugins: PluginRegistry[Any]) -> list[dict[str, Any]]:
    """The same for admission or placement plug-ins."""
    return [_entry(name, plugins.resolve(name)) for name in plugins.names()]


def runs_as(name: str) -> str | None:
    """The name a leader running policy `name` reports (`running.name`): the class's own
    `name`, which for a plug-in named by its module path (`pkg.mod:Class`) is not the path;
    None for `auto` (the leader reports the policy its controller chose) or a name that does
    not resolve here."""
    try:
        cls = registry.policy_class(name)
    except registry.UnknownPolicyError:
        return None
    own = getattr(cls, "name", None)
    return own if isinstance(own, str) else None


@router.get("/policy")
async def get_policy(ctx: Ctx, _: Admin) -> dict[str, Any]:
    """The policy in force (and what the leader reports running, as of `running_age_s`
    seconds ago: a stopped leader's view stays behind), `active_runs_as` (the name
    the leader reports while it runs the active policy: see `runs_as`), `expected` (the
    `policy` knob's stored text, '' = unset, to send back with a switch), plus the catalogues
    of policies, admission and placement plug-ins with their params schemas; `knob_errors`:
    the `policy`, `admission` or `placement` values the leader could not build, and why."""
    live = await ctx.stores.checkpoints.load_live()
    knobs = await ctx.stores.knobs.get_all()
    knob, expected = await ctx.stores.knobs.read("policy")  # one read: `expected` is its text
    active = await active_policy(ctx, knob)
    return {
        "active": active,
        "active_runs_as": runs_as(str(active["name"])),
        "expected": expected,
        "running": live.to_json()["policy"] if live else None,
        "running_age_s": max(0.0, time.time() - live.updated_at) if live else None,
        "knob_errors": dict(live.knob_errors) if live else {},
        "controller": live.controller if live else None,
        "admission": (live and live.admission) or _json(knobs.get("admission")),
        "placement": (live and live.placement) or _json(knobs.get("placement")),
        "policies": policy_catalog(),
        "admissions": plugin_catalog(ADMISSIONS),
        "placements": plugin_catalog(PLACEMENTS),
    }


@router.put("/policy", responses=KNOB_CHANGED)
async def switch_policy(ctx: Ctx, actor: Admin, who: Caller, body: PolicyChange) -> dict[str, Any]:
    """Validate `{name, params}` (422 with per-field errors), publish it as the `policy` knob
    (the leader switches with zero downtime) and audit it as `policy.switch`; a plug-in named
    by its module path only for an admin (`plugin_guard.py`). With `expected` (from `GET
    /admin/policy`), only over that policy (409 `knob_changed` otherwise)."""
    refuse_imports(who, body.name, "name")
    new = validate_policy(body.name, body.params)
    old = await active_policy(ctx)
    version, audit = await set_knob(
        ctx,
        "policy",
        new,
        actor=actor,
        reason=body.reason,
        action="policy.switch",
        old=old,
        expected=body.expected,
    )
    return {"active": new, "previous": old, "version": version, "audit": as_json(audit)}


def _history(db: Database, limit: int) -> list[AuditRecord]:
    with db.reader() as r:
        return r.audit.list(action="policy.switch", limit=limit)


@router.get("/policy/history")
async def policy_history(
    ctx: Ctx, _: Admin, limit: Annotated[int, Query(ge=1, le=1000)] = 100
) -> dict[str, Any]:
    """Policy switches, newest first (actor, old, new, reason)."""
    return {"data": as_json(await in_thread(_history, ctx.db, limit))}


def _json(value: KnobValue | None) -> JsonValue:
    return None if value is None else value.to_json()
