"""OpenAI-shaped errors: `{"error": {"message", "type", "param", "code"}}` with honest statuses.

Every failure a client can see goes through `ApiError` (or one of the handlers registered by
`install_error_handlers`), so no route ever returns FastAPI's default `{"detail": ...}` shape.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from control_plane.state.errors import StateUnavailable
from storage.write_guard import DATABASE_ERRORS, is_outage

log = logging.getLogger(__name__)

_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    413: "invalid_request_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
    500: "server_error",
    502: "server_error",
    503: "service_unavailable",
    504: "timeout_error",
}


FAILURE_CODES = frozenset(
    {"state_unavailable", "scheduler_unavailable", "database_unavailable", "internal_error"}
)
"""The 5xx answers `arbiter_gateway_failed` counts (`error_response`)."""
DATABASE_RETRY_AFTER_S = 5


class ApiError(Exception):
    """An error the client should see, rendered in OpenAI's shape."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        code: str | None = None,
        param: str | None = None,
        type_: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.param = param
        self.type = type_ or _TYPES.get(status, "server_error")
        self.headers = headers or {}
        self.field_errors: list[dict[str, str]] = []
        self.counted = False
        """Already counted where it arose (a request given up in the queue is counted as
        withdrawn), so `error_response` does not count it as a failure again."""

    def body(self) -> dict[str, Any]:
        return error_body(self.message, self.type, self.param, self.code)

    def response(self) -> JSONResponse:
        return JSONResponse(self.body(), status_code=self.status, headers=self.headers)


def error_body(message: str, type_: str, param: str | None, code: str | None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


def unavailable(message: str = "Arbiter's state store is unreachable; retry shortly.") -> ApiError:
    return ApiError(503, message, code="state_unavailable", headers={"Retry-After": "1"})


_LOCATIONS = ("body", "query", "path", "header", "cookie")
# pydantic names the member of a union it tried (`stop.str`, `content.list[dict[str,any]]`);
# clients only care about the field
_UNION_TAGS = frozenset({"str", "int", "float", "bool", "none", "constrained-str"})


def _param(loc: Any) -> str:
    parts = [str(p) for p in loc]
    if parts and parts[0] in _LOCATIONS:
        parts = parts[1:]
    return ".".join(p for p in parts if "[" not in p and p not in _UNION_TAGS)


def _validation_error(exc: RequestValidationError, field_status: int) -> ApiError:
    errors = exc.errors()
    first = errors[0] if errors else {"loc": (), "msg": "invalid request", "type": ""}
    if first.get("type") == "json_invalid":
        return ApiError(400, f"Malformed JSON body: {first.get('msg')}", code="invalid_json")
    param = _param(first.get("loc", ())) or None
    msg = f"Invalid value for '{param}': {first.get('msg')}" if param else str(first.get("msg"))
    err = ApiError(field_status if param else 400, msg, param=param, code="invalid_value")
    seen: set[str] = set()
    for e in errors:
        p = _param(e.get("loc", ()))
        if p and p not in seen:
            seen.add(p)
            err.field_errors.append(
                {"param": p, "message": f"Invalid value for '{p}': {e.get('msg')}"}
            )
    return err


def error_response(exc: Exception, request: Request) -> JSONResponse:
    """The answer to an error raised while serving `request` (not a validation error): the
    one rendering of `ApiError`, HTTP, state-store and unexpected errors (the last logged);
    Redis or the scheduler unavailable and internal errors are counted in the app's metrics
    (`failed(code)`), where it has them; queue timeouts and worker failures have counters of
    their own (withdrawn, finished with `error`)."""
    err = _as_api_error(exc, request)
    if err.code in FAILURE_CODES and not err.counted:
        metrics = getattr(request.app.state, "metrics", None)
        if metrics is not None and hasattr(metrics, "failed"):
            metrics.failed(err.code)
    return err.response()


def _as_api_error(exc: Exception, request: Request) -> ApiError:
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, StarletteHTTPException):
        headers = dict(exc.headers or {})
        code = getattr(exc, "code", None)  # an HTTP exception of ours may name its code
        return ApiError(
            exc.status_code,
            str(exc.detail),
            code=code if isinstance(code, str) else None,
            headers=headers,
        )
    if isinstance(exc, StateUnavailable):
        return unavailable()
    if is_outage(exc):  # not a fault of ours or the request's: the client may retry
        brief = str(exc).split("\n", 1)[0][:300]  # not SQLAlchemy's statement and parameters
        log.warning("database unavailable on %s %s: %s", request.method, request.url.path, brief)
        return ApiError(
            503,
            "Arbiter's database is unavailable; retry shortly.",
            code="database_unavailable",
            headers={"Retry-After": str(DATABASE_RETRY_AFTER_S)},
        )
    log.exception("unexpected error on %s %s", request.method, request.url.path, exc_info=exc)
    return ApiError(500, "Internal error; it has been logged.", code="internal_error")


def install_error_handlers(app: FastAPI) -> None:
    """Map validation, HTTP, state-store and unexpected errors to OpenAI's shape."""

    async def on_error(request: Request, exc: Exception) -> JSONResponse:
        return error_response(exc, request)

    async def on_validation(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        if not request.url.path.startswith("/admin"):
            # OpenAI's shape and status: OpenAI and vLLM answer a bad field with 400, which
            # clients catch as `BadRequestError` (a 422 is `UnprocessableEntityError`)
            return _validation_error(exc, 400).response()
        err = _validation_error(exc, 422)
        return JSONResponse({**err.body(), "errors": err.field_errors}, status_code=err.status)

    app.add_exception_handler(ApiError, on_error)
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(StarletteHTTPException, on_error)
    app.add_exception_handler(StateUnavailable, on_error)
    for database_error in DATABASE_ERRORS:  # handled here: Starlette re-raises the rest
        app.add_exception_handler(database_error, on_error)
    app.add_exception_handler(Exception, on_error)


def given_up(reason: str, timeout: float, no_leader: ApiError, request_id: str) -> Response:
    """Raise the answer to a request withdrawn from the queue, naming it (`X-Arbiter-Request-Id`:
    its row says how it ended); a client that left gets a bare 499 (nobody reads it)."""
    named = {"X-Arbiter-Request-Id": request_id}
    if reason == "queue_timeout":
        raise ApiError(
            504,
            f"Request waited {timeout:.0f}s in the queue without being scheduled; retry later.",
            code="queue_timeout",
            headers={"Retry-After": "5", **named},
        )
    if reason == "no_leader":
        no_leader.counted = True  # as withdrawn (`no_leader`)
        no_leader.headers.update(named)
        raise no_leader
    return Response(status_code=499)
