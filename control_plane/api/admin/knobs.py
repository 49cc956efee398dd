"""`/admin/knobs`: read every knob; set one (validated, announced, audited as `knob.set`).

Setting `fairness` also carries α and β into the active policy's params when that policy has
them (ExFairS), so the scheduler applies them at once.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from control_plane.admin.records import as_json
from control_plane.api.admin.deps import AdminContext, Ctx
from control_plane.api.admin.knob_rules import known_knobs, validate_knob, validate_policy
from control_plane.api.admin.plugin_guard import PLUGIN_KNOBS, plugin_name, refuse_imports
from control_plane.api.admin.recorded import recorded_then_live
from control_plane.api.admin.schemas import KnobChange
from control_plane.api.auth import Admin, Caller
from control_plane.contracts.knobs import KnobValue, PluginChoice, decode_knob
from control_plane.gateway.errors import ApiError
from control_plane.policies.registry import UnknownPolicyError, policy_class
from control_plane.state import KnobChanged
from storage.db import Repos
from storage.records import AuditRecord

router = APIRouter(tags=["admin: knobs"])


async def set_knob(
    ctx: AdminContext,
    name: str,
    value: Any,
    *,
    actor: str,
    reason: str,
    action: str,
    old: Any = None,
    expected: str | None = None,
) -> tuple[int, AuditRecord]:
    """Audit, store and announce one knob value (already validated) → (version, audit row);
    the audit row commits only once the value is stored (`recorded_then_live`). The value is
    stored only over the one read here (409 `knob_changed` otherwise), and only if Redis runs
    the change within a second: a change that timed out here can neither land later without
    its audit row nor overwrite a later change.

    The audit row's `old` is the knob's previous value unless `old` says what was in force;
    `expected`: the knob's text the caller decided on (read here when None).
    """
    stored, stored_text = await ctx.stores.knobs.read(name)
    if expected is not None:
        stored_text = expected
    if old is None:
        old = None if stored is None else stored.to_json()
    typed = decode_knob(name, value)

    async def go_live() -> int:
        try:  # only over what was read, and never after this call was given up on
            return await ctx.stores.knobs.replace(name, typed, expected=stored_text)
        except KnobChanged as exc:
            raise ApiError(
                409, f"{exc}: read it again and retry", code="knob_changed", param="name"
            ) from exc

    def audit(r: Repos) -> AuditRecord:
        return r.audit.append(
            actor=actor,
            action=action,
            target="policy" if name == "policy" else f"knob:{name}",
            old=old,
            new=value,
            reason=reason,
        )

    row, version = await recorded_then_live(ctx.db, audit, go_live)
    return version, row


async def active_policy(ctx: AdminContext, knob: KnobValue | None = None) -> dict[str, Any]:
    """`{"name", "params"}` of the policy in force: the knob (`knob`: as the caller read it),
    else the leader's, else settings."""
    if knob is None:
        knob = await ctx.stores.knobs.get("policy")
    if isinstance(knob, PluginChoice):
        return {"name": knob.name, "params": dict(knob.params)}
    live = await ctx.stores.checkpoints.load_live()
    if live is not None and live.policy.name:
        return {"name": live.policy.name, "params": dict(live.policy.params)}
    return {"name": ctx.settings.policy, "params": {}}


async def _carry_fairness(
    ctx: AdminContext, fairness: dict[str, Any], actor: str, reason: str
) -> dict[str, Any] | None:
    _, decided_on = await ctx.stores.knobs.read("policy")  # a switch after this read wins
    current = await active_policy(ctx)
    try:
        fields = policy_class(str(current["name"])).Params.model_fields
    except UnknownPolicyError:
        return None
    carried = {k: v for k, v in fairness.items() if k in fields}
    if not carried:
        return None
    new = validate_policy(str(current["name"]), {**current["params"], **carried})
    await set_knob(
        ctx,
        "policy",
        new,
        actor=actor,
        reason=f"fairness knob: {reason}",
        action="policy.switch",
        old=current,
        expected=decided_on,
    )
    return new


@router.get("/knobs")
async def list_knobs(ctx: Ctx, _: Admin) -> dict[str, Any]:
    """Current values, the change counter, what each known knob means (with its schema) and,
    per knob (every known one, set or not), `expected`: its stored text ('' = unset), read
    together with its value — send it back with a change to refuse it (409 `knob_changed`)
    if the knob changed since."""
    knobs = ctx.stores.knobs
    version = await knobs.version()
    known = known_knobs()
    values: dict[str, Any] = {}
    expected: dict[str, str] = {}
    for name in sorted({*(await knobs.get_all()), *known}):
        value, expected[name] = await knobs.read(name)
        if value is not None:
            values[name] = value.to_json()
    return {"knobs": values, "version": version, "known": known, "expected": expected}


KNOB_CHANGED: dict[int | str, dict[str, Any]] = {
    409: {
        "description": "The knob changed since it was read (`knob_changed`: since the `expected` "
        "text, or while this change was made): read it again and retry",
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/AdminError"}}},
    }
}


@router.put("/knobs/{name}", responses=KNOB_CHANGED)
async def put_knob(
    ctx: Ctx, actor: Admin, who: Caller, name: str, body: KnobChange
) -> dict[str, Any]:
    """Validate and set a knob; subscribers (the scheduler, gateways) see it at once. With
    `expected` (from `GET /admin/knobs`), only over that value (409 `knob_changed` otherwise)."""
    if name in PLUGIN_KNOBS:
        refuse_imports(who, plugin_name(body.value), "value.name")
    value = validate_knob(name, body.value)
    action = "policy.switch" if name == "policy" else "knob.set"
    version, audit = await set_knob(
        ctx, name, value, actor=actor, reason=body.reason, action=action, expected=body.expected
    )
    policy = None
    if name == "fairness":
        policy = await _carry_fairness(ctx, value, actor, body.reason)
    return {
        "name": name,
        "value": value,
        "version": version,
        "audit": as_json(audit),
        "policy": policy,
    }
