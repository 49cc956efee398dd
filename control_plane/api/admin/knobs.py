"""`/admin/knobs`: read every knob; set one (validated, announced, audited as `knob.set`).

Setting `fairness` also carries α and β into the active policy's params when that policy has
them (ExFairS), so the scheduler applies them at once: both knobs are stored in one step, with
an audit row each, or neither is. Under `auto` the leader gives them to each policy its
meta-controller builds that takes them; a pinned policy without them leaves scheduling as it
was, and the answer says so in `warnings` (the change reaches only the live fairness view).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter

from control_plane.admin.records import as_json
from control_plane.api.admin.deps import AdminContext, Ctx, conflict
from control_plane.api.admin.knob_rules import known_knobs, validate_knob, validate_policy
from control_plane.api.admin.plugin_guard import PLUGIN_KNOBS, plugin_name, refuse_imports
from control_plane.api.admin.recorded import recorded_then_live
from control_plane.api.admin.schemas import KnobChange
from control_plane.api.auth import Admin, Caller
from control_plane.contracts.knobs import KnobValue, PluginChoice, decode_knob
from control_plane.control.meta import AUTO
from control_plane.gateway.errors import ApiError
from control_plane.policies.registry import UnknownPolicyError, policy_class
from control_plane.state import KnobChanged
from storage.db import Repos
from storage.records import AuditRecord

router = APIRouter(tags=["admin: knobs"])


@dataclass(frozen=True, slots=True)
class KnobWrite:
    """One knob change of `set_knobs` (its value already validated): `old` is what the audit
    row says was in force (the knob's previous value when None), `expected` the knob's text
    the change was decided on (read by `set_knobs` when None)."""

    name: str
    value: Any
    action: str
    reason: str
    old: Any = None
    expected: str | None = None


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
    """`set_knobs` of one knob → (version, audit row)."""
    version, rows = await set_knobs(
        ctx, [KnobWrite(name, value, action, reason, old, expected)], actor=actor
    )
    return version, rows[0]


async def set_knobs(
    ctx: AdminContext, writes: Sequence[KnobWrite], *, actor: str
) -> tuple[int, list[AuditRecord]]:
    """Audit, store and announce knob values together → (last version, audit rows in order);
    the audit rows commit only once every value is stored (`recorded_then_live`). The values
    are stored in one step, only over the texts read here or given (409 `knob_changed`
    otherwise: then none is), and only if Redis runs the change within a second: a change
    that timed out here can neither land later without its audit rows nor overwrite a later
    change."""
    changes: list[tuple[str, KnobValue, str]] = []
    olds: list[Any] = []
    for write in writes:
        stored, stored_text = await ctx.stores.knobs.read(write.name)
        olds.append(write.old if write.old is not None else _json_of(stored))
        text = stored_text if write.expected is None else write.expected
        changes.append((write.name, decode_knob(write.name, write.value), text))

    async def go_live() -> int:
        try:  # only over what was read, and never after this call was given up on
            return await ctx.stores.knobs.replace_many(changes)
        except KnobChanged as exc:
            raise ApiError(
                409, f"{exc}: read it again and retry", code="knob_changed", param="name"
            ) from exc

    def audit(r: Repos) -> list[AuditRecord]:
        return [
            r.audit.append(
                actor=actor,
                action=w.action,
                target="policy" if w.name == "policy" else f"knob:{w.name}",
                old=old,
                new=w.value,
                reason=w.reason,
            )
            for w, old in zip(writes, olds, strict=True)
        ]

    rows, version = await recorded_then_live(ctx.db, audit, go_live)
    return version, rows


def _json_of(value: KnobValue | None) -> Any:
    return None if value is None else value.to_json()


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


async def _fairness_carry(
    ctx: AdminContext, fairness: dict[str, Any], reason: str
) -> KnobWrite | None:
    """The policy switch that carries α and β into the active policy's params, decided on the
    policy knob as read here (a switch after this read refuses the whole change), or None when
    the active policy has neither."""
    knob, decided_on = await ctx.stores.knobs.read("policy")
    current = await active_policy(ctx, knob)
    try:
        fields = policy_class(str(current["name"])).Params.model_fields
    except UnknownPolicyError:
        return None
    carried = {k: v for k, v in fairness.items() if k in fields}
    if not carried:
        return None
    new = validate_policy(str(current["name"]), {**current["params"], **carried})
    return KnobWrite(
        "policy", new, "policy.switch", f"fairness knob: {reason}", current, decided_on
    )


@router.get("/knobs")
async def list_knobs(ctx: Ctx, _: Admin) -> dict[str, Any]:
    """Current values, the change counter, what each known knob means (with its schema) and,
    per knob (every known one, set or not), `expected`: its stored text ('' = unset), read
    together with its value — send it back with a change to refuse it (409 `knob_changed`)
    if the knob changed since; `fallbacks`: what gateways use while a knob is unset (their
    settings: `queue_cap` ← `ARBITER_DEFAULT_QUEUE_CAP`)."""
    knobs = ctx.stores.knobs
    version = await knobs.version()
    known = known_knobs()
    values: dict[str, Any] = {}
    expected: dict[str, str] = {}
    for name in sorted({*(await knobs.get_all()), *known}):
        value, expected[name] = await knobs.read(name)
        if value is not None:
            values[name] = value.to_json()
    fallbacks = {"queue_cap": {"default": ctx.settings.default_queue_cap}}
    return {
        "knobs": values,
        "version": version,
        "known": known,
        "expected": expected,
        "fallbacks": fallbacks,
    }


KNOB_CHANGED = conflict(
    "The knob changed since it was read (`knob_changed`: since the `expected` text, or while "
    "this change was made): read it again and retry"
)


@router.put("/knobs/{name}", responses=KNOB_CHANGED)
async def put_knob(
    ctx: Ctx, actor: Admin, who: Caller, name: str, body: KnobChange
) -> dict[str, Any]:
    """Validate and set a knob; subscribers (the scheduler, gateways) see it at once. With
    `expected` (from `GET /admin/knobs`), only over that value (409 `knob_changed` otherwise).
    Answers `version`, the knobs' version after the change (with a `fairness` carry, the
    policy switch's, the last of the two), `audit` (the knob's row) and `policy` (the params
    carried, or null)."""
    if name in PLUGIN_KNOBS:
        refuse_imports(who, plugin_name(body.value), "value.name")
    value = validate_knob(name, body.value)
    action = "policy.switch" if name == "policy" else "knob.set"
    writes = [KnobWrite(name, value, action, body.reason, expected=body.expected)]
    carry = await _fairness_carry(ctx, value, body.reason) if name == "fairness" else None
    if carry is not None:  # the knob and the params it carries land together or not at all
        writes.append(carry)
    version, audit = await set_knobs(ctx, writes, actor=actor)
    answer = {
        "name": name,
        "value": value,
        "version": version,
        "audit": as_json(audit[0]),
        "policy": None if carry is None else carry.value,
    }
    if name == "fairness" and carry is None and (why := await _not_carried(ctx)):
        answer["warnings"] = [why]
    return answer


async def _not_carried(ctx: AdminContext) -> str | None:
    """Why a `fairness` change leaves scheduling as it was: the pinned policy takes no α or β
    (None under `auto`: the leader gives them to each policy its meta-controller builds that
    takes them)."""
    active = str((await active_policy(ctx))["name"])
    if active == AUTO:
        return None
    return (
        f"the policy in force, {active!r}, takes no alpha or beta: scheduling is unchanged; "
        "the knob sets the α and β of the live fairness view (SAFI) only"
    )
