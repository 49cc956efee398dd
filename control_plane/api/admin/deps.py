"""What every admin route needs: the app's stores, database and directory cache, a way to run
blocking SQL off the event loop with storage errors mapped to API errors, and the rule that
every change carries a reason."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, ParamSpec, Protocol, TypeVar

from fastapi import Depends, Query, Request
from pydantic import StringConstraints

from control_plane.gateway.errors import ApiError
from control_plane.settings import Settings
from control_plane.state import StateStores
from storage.db import Database
from storage.errors import (
    AlreadyExistsError,
    ChangedMeanwhile,
    InvalidValueError,
    NotFoundError,
)

P = ParamSpec("P")
T = TypeVar("T")

NO_NUL = r"^[^\x00]*$"
"""Free text SQL can store: PostgreSQL's text refuses U+0000 (a 500 after the change was
checked, where a 422 names the field)."""
ReasonText = Annotated[
    str, StringConstraints(strip_whitespace=True, min_length=1, max_length=2000, pattern=NO_NUL)
]
"""A non-blank reason (the audit log refuses changes without one)."""


class DirectoryCache(Protocol):
    """The gateway's tenant/key cache: cleared after any tenant, app, agent or key change."""

    def invalidate(self) -> None: ...


@dataclass(frozen=True, slots=True)
class AdminContext:
    """The resources of the running app that admin routes use."""

    settings: Settings
    db: Database
    stores: StateStores
    directory: DirectoryCache


def admin_context(request: Request) -> AdminContext:
    state = request.app.state
    return AdminContext(state.settings, state.db, state.stores, state.directory)


Ctx = Annotated[AdminContext, Depends(admin_context)]


def query_reason(reason: Annotated[str | None, Query(max_length=2000)] = None) -> str:
    """The `?reason=` of a change sent without a body (DELETE); 422 when missing or blank."""
    if reason is None or not reason.strip():
        raise ApiError(
            422,
            "A reason is required for every change: add '?reason=...'.",
            param="reason",
            code="missing_reason",
        )
    if "\x00" in reason:
        raise ApiError(422, "reason: must not contain U+0000", param="reason", code="invalid_value")
    return reason.strip()


Reason = Annotated[str, Depends(query_reason)]


def storage_error(exc: Exception) -> ApiError:
    """The API error for a storage domain error (404, 409 or 422)."""
    if isinstance(exc, NotFoundError):
        return ApiError(404, str(exc), code="not_found")
    if isinstance(exc, AlreadyExistsError):
        return ApiError(409, str(exc), code="already_exists")
    if isinstance(exc, ChangedMeanwhile):
        return ApiError(409, str(exc), code="node_changed")
    return ApiError(422, str(exc), code="invalid_value")


async def in_thread(fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """Run blocking SQL work in a thread; storage domain errors become API errors."""
    try:
        return await asyncio.to_thread(fn, *args, **kwargs)
    except (NotFoundError, AlreadyExistsError, ChangedMeanwhile, InvalidValueError) as exc:
        raise storage_error(exc) from exc


def conflict(description: str) -> dict[int | str, dict[str, Any]]:
    """An operation's documented 409 (`responses=`), in the admin error shape."""
    return {
        409: {
            "description": description,
            "content": {
                "application/json": {"schema": {"$ref": "#/components/schemas/AdminError"}}
            },
        }
    }


def not_found(what: str) -> ApiError:
    return ApiError(404, f"{what} does not exist", code="not_found")


class FieldErrors(ApiError):
    """A 422 listing every invalid field: `{"error": {...}, "errors": [{"param", "message"}]}`.

    `error.param` names the first invalid field, so clients that read only OpenAI's shape still
    learn where the problem is; forms use `errors` to show each message next to its field.
    """

    def __init__(self, errors: list[dict[str, Any]], *, prefix: str = "") -> None:
        self.errors = [
            {
                "param": prefix + ".".join(str(p) for p in e.get("loc", ())),
                "message": str(e.get("msg", "invalid value")),
            }
            for e in errors
        ] or [{"param": prefix.rstrip("."), "message": "invalid value"}]
        first = self.errors[0]
        super().__init__(
            422,
            f"Invalid value for '{first['param']}': {first['message']}",
            code="invalid_value",
            param=first["param"] or None,
        )

    def body(self) -> dict[str, Any]:
        return {**super().body(), "errors": self.errors}
