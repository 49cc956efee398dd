"""A small HTTP client for Arbiter's admin API — the console's only way to Arbiter.

Every call sends the admin token as a Bearer header (never in a URL). An error answer becomes
`AdminApiError` carrying the API's message, the field it names (`param`) and, for forms, every
per-field error; an unreachable API is an `AdminApiError` with status 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import httpx

ACTOR = "console"


@dataclass
class AdminApiError(Exception):
    """What went wrong, as the API said it: status, message, the field it names, all fields."""

    status: int
    message: str
    param: str | None = None
    code: str | None = None
    errors: list[dict[str, str]] = field(default_factory=list)

    def __str__(self) -> str:
        where = f" ({self.param})" if self.param else ""
        return (
            f"{self.message}{where}"
            if self.status == 0
            else f"{self.status}: {self.message}{where}"
        )

    def field_errors(self) -> dict[str, str]:
        """Field → message, for showing each message next to its form field."""
        found = {e["param"]: e["message"] for e in self.errors if e.get("param")}
        if not found and self.param:
            found[self.param] = self.message
        return found


def _error(resp: httpx.Response) -> AdminApiError:
    try:
        body = resp.json()
    except ValueError:
        return AdminApiError(resp.status_code, resp.text[:300] or resp.reason_phrase)
    err = body.get("error") if isinstance(body, dict) else None
    if not isinstance(err, dict):
        return AdminApiError(resp.status_code, str(body)[:300])
    return AdminApiError(
        resp.status_code,
        str(err.get("message") or resp.reason_phrase),
        err.get("param"),
        err.get("code"),
        list(body.get("errors") or []),
    )


class AdminClient:
    """Typed calls to `/admin/...`; one short-lived connection per call (the console is sync)."""

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        actor: str = ACTOR,
        timeout_s: float = 15.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._headers = {"Authorization": f"Bearer {token}", "X-Arbiter-Actor": actor}
        self._timeout = timeout_s
        self._transport = transport

    def request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        body: dict[str, Any] | None = None,
    ) -> httpx.Response:
        """One call; raises AdminApiError for an error answer or an unreachable API."""
        query = {k: v for k, v in (params or {}).items() if v is not None}
        try:
            with httpx.Client(
                base_url=self.base_url,
                headers=self._headers,
                timeout=self._timeout,
                transport=self._transport,
            ) as client:
                resp = client.request(method, path, params=query, json=body)
        except httpx.HTTPError as exc:
            raise AdminApiError(0, f"Cannot reach the admin API at {self.base_url}: {exc}") from exc
        if resp.status_code >= 400:
            raise _error(resp)
        return resp

    def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        return self.request(method, path, **kwargs).json()

    def whoami(self) -> dict[str, Any]:
        """The caller: `name` (the audit actor), `role` and `bootstrap` (the shared token)."""
        return dict(self._json("GET", "/admin/whoami"))

    # -- live ------------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        return dict(self._json("GET", "/admin/state"))

    def nodes(self, **filters: str | None) -> dict[str, Any]:
        return dict(self._json("GET", "/admin/nodes", params=filters))

    def live_history(self, **params: Any) -> dict[str, Any]:
        """`/admin/live/history`: per-node time series over `range_s` (see the route)."""
        return dict(self._json("GET", "/admin/live/history", params=params))

    def hierarchy(self) -> list[dict[str, Any]]:
        return list(self._json("GET", "/admin/hierarchy")["data"])

    # -- workers ---------------------------------------------------------------------------
    def workers(self) -> list[dict[str, Any]]:
        return list(self._json("GET", "/admin/workers")["data"])

    def set_draining(self, worker_id: str, draining: bool, reason: str) -> dict[str, Any]:
        action = "drain" if draining else "undrain"
        return dict(
            self._json(
                "POST", f"/admin/workers/{_seg(worker_id)}/{action}", body={"reason": reason}
            )
        )

    # -- policy and knobs ------------------------------------------------------------------
    def policy(self) -> dict[str, Any]:
        return dict(self._json("GET", "/admin/policy"))

    def switch_policy(
        self, name: str, params: dict[str, Any], reason: str, *, expected: str | None = None
    ) -> dict[str, Any]:
        """Switch the policy; with `expected` (from `policy()["expected"]`) only over that
        policy: one switched since is refused (409 `knob_changed`)."""
        body: dict[str, Any] = {"name": name, "params": params, "reason": reason}
        if expected is not None:
            body["expected"] = expected
        return dict(self._json("PUT", "/admin/policy", body=body))

    def knobs(self) -> dict[str, Any]:
        return dict(self._json("GET", "/admin/knobs"))

    def set_knob(
        self, name: str, value: Any, reason: str, *, expected: str | None = None
    ) -> dict[str, Any]:
        """Set a knob; with `expected` (its text from `knobs()["expected"]`) only over that
        value: a knob changed since is refused (409 `knob_changed`)."""
        body = {"value": value, "reason": reason}
        if expected is not None:
            body["expected"] = expected
        return dict(self._json("PUT", f"/admin/knobs/{_seg(name)}", body=body))

    def set_weight(
        self, node: str, weight: float, reason: str, *, expected: float | None = None
    ) -> dict[str, Any]:
        """Set a node's weight; with `expected` (the weight as read) only over that weight:
        a node changed since is refused (409 `node_changed`)."""
        body: dict[str, Any] = {"weight": weight, "reason": reason}
        if expected is not None:
            body["expected"] = expected
        return dict(self._json("PUT", f"/admin/weights/{_path(node)}", body=body))

    def update_tenant(self, tenant: str, changes: dict[str, Any], reason: str) -> dict[str, Any]:
        body = {**changes, "reason": reason}
        return dict(self._json("PATCH", f"/admin/tenants/{_seg(tenant)}", body=body))

    def audit(self, **filters: Any) -> list[dict[str, Any]]:
        return list(self._json("GET", "/admin/audit", params=filters)["data"])

    # -- workflows and reports -------------------------------------------------------------
    def workflows(self, limit: int | None = None) -> dict[str, Any]:
        """Applications in the last 24 h's request history (`data`), from the `limit` most
        recent rows (`rows`: how many were read)."""
        return dict(self._json("GET", "/admin/workflows", params={"limit": limit}))

    def workflow(
        self, app: str, tenant: str | None = None, limit: int | None = None
    ) -> dict[str, Any]:
        """One application's graph from its `limit` most recent rows (`calls`: rows read)."""
        params = {"tenant": tenant, "limit": limit}
        return dict(self._json("GET", f"/admin/workflows/{_seg(app)}", params=params))

    def learned_workflows(
        self, tenant: str | None = None, app: str | None = None
    ) -> dict[str, Any]:
        """What the scheduler leader learned per application (`updated_at`, `policy`, `data`)."""
        params = {"tenant": tenant, "app": app}
        return dict(self._json("GET", "/admin/learned/workflows", params=params))

    def report(self, **params: Any) -> dict[str, Any]:
        return dict(self._json("GET", "/admin/reports", params={**params, "format": "json"}))

    def report_csv(self, **params: Any) -> str:
        return self.request("GET", "/admin/reports", params={**params, "format": "csv"}).text

    def service_by_kind(
        self, start: str | float | None = None, end: str | float | None = None
    ) -> dict[str, Any]:
        """Service per tenant per model kind for arrivals in [start, end) (epoch s or ISO
        8601; the API's defaults: the last 24 h)."""
        params = {"from": start, "to": end}
        return dict(self._json("GET", "/admin/reports/service-by-kind", params=params))

    def program_report(
        self, start: str | float | None = None, end: str | float | None = None, **params: Any
    ) -> dict[str, Any]:
        """Per application, program-level latencies of the workflows started in [start, end)
        (epoch s or ISO 8601; optional `tenant`), and preemptions per worker (live)."""
        query = {"from": start, "to": end, **params}
        return dict(self._json("GET", "/admin/reports/programs", params=query))


def _seg(name: str) -> str:
    """One URL path segment: a name with '#', '?', '%' or '/' in it (one made before names were
    checked everywhere) must not address another resource."""
    return quote(name, safe="")


def _path(node: str) -> str:
    """A node path `tenant[/app[/agent]]`, each level quoted on its own."""
    return "/".join(_seg(part) for part in node.split("/"))
