"""The gateway's OpenAPI document, made honest: every status a route can answer, with its body.

FastAPI only knows the success status and its own 422. This module adds, per route: the error
answers (OpenAI's error shape; the admin API's also lists every bad field under `errors`), the
bearer security of the tenant and admin APIs, the `X-Arbiter-*` request headers of the
completion routes (with the bounds `gateway.tags` enforces), `text/event-stream` for streamed
completions and `text/plain; version=0.0.4` for `/metrics`. Guarantee: a client (or a fuzzer)
reading this document is never surprised by a status code or a content type.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from control_plane.gateway.bounds import MAX_SLO_MS, MAX_TIER, NAME_PATTERN

_REASONS = {
    400: "Malformed JSON, a field of the wrong type or out of bounds (`param` names it; the "
    "admin API answers those with 422), an invalid `X-Arbiter-*` tag, or a request the model "
    "cannot take",
    401: "Missing, unknown or revoked credentials",
    403: "The admin API is disabled (no admin token configured), or the caller's role is too low",
    404: "Unknown model, resource or route",
    409: "The resource already exists",
    413: "Request body over the configured limit",
    422: "A field has the wrong type or is out of bounds (`param` names it; every one under "
    "`errors`)",
    429: "A tenant limit was hit (queue cap, rate, token budget, failed logins); see Retry-After",
    500: "Unexpected error (logged)",
    502: "The worker failed before answering",
    503: "Arbiter's state store (Redis) or database is unreachable, or no scheduler leads; see "
    "Retry-After",
    504: "The request waited in the queue past the queue timeout",
}

_ERROR_DETAIL: dict[str, Any] = {
    "type": "object",
    "required": ["message", "type"],
    "properties": {
        "message": {"type": "string"},
        "type": {"type": "string"},
        "param": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        # workers answer vLLM's integer codes; Arbiter's own codes are strings
        "code": {"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]},
    },
}
_SCHEMAS: dict[str, Any] = {
    "Error": {
        "type": "object",
        "required": ["error"],
        "properties": {"error": _ERROR_DETAIL},
    },
    "AdminError": {
        "type": "object",
        "required": ["error"],
        "properties": {
            "error": _ERROR_DETAIL,
            "errors": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["param", "message"],
                    "properties": {"param": {"type": "string"}, "message": {"type": "string"}},
                },
            },
        },
    },
}

_COMPLETION_ERRORS = (400, 401, 404, 413, 429, 500, 502, 503, 504)
_TENANT_ERRORS = (400, 401, 413, 429, 500, 503)
_ADMIN_ERRORS = (401, 403, 404, 413, 422, 429, 500, 503)
_BODY_ERRORS = (400, 409)  # malformed JSON; a create or rename that collides
_PUBLIC_ERRORS = (413, 500)
_COMPLETIONS = ("/v1/chat/completions", "/v1/completions")
_IMAGES = "/v1/images/generations"


def _tag_headers() -> list[dict[str, Any]]:
    name = {"type": "string", "pattern": NAME_PATTERN}
    slo = {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_SLO_MS}
    schemas: dict[str, dict[str, Any]] = {
        "X-Arbiter-App": name,
        "X-Arbiter-Agent": name,
        "X-Arbiter-Workflow": name,
        "X-Arbiter-Upstream": name,
        "X-Arbiter-Task": name,
        "X-Arbiter-Priority": {"type": "integer", "minimum": 0, "maximum": MAX_TIER},
        "X-Arbiter-SLO-TTFT-Ms": slo,
        "X-Arbiter-SLO-TPOT-Ms": slo,
        "X-Arbiter-SLO-E2E-Ms": slo,
    }
    return [
        {"name": header, "in": "header", "required": False, "schema": schema}
        for header, schema in schemas.items()
    ]


def _metadata() -> dict[str, Any]:
    """`metadata`: free-form, except Arbiter's tags, which follow the headers' rules."""
    props = {
        p["name"].removeprefix("X-Arbiter-").lower().replace("-", "_"): p["schema"]
        for p in _tag_headers()
    }
    return {
        "anyOf": [
            {"type": "object", "properties": props, "additionalProperties": True},
            {"type": "null"},
        ],
        "description": "Forwarded to the worker without Arbiter's tags (the same keys as the "
        "X-Arbiter-* headers; a header wins).",
    }


def _errors_for(path: str, method: str) -> tuple[int, ...]:
    if path in _COMPLETIONS or path == _IMAGES:
        return _COMPLETION_ERRORS
    if path.startswith("/v1/"):
        return _TENANT_ERRORS
    if path.startswith("/admin"):
        with_body = method in ("post", "put", "patch")
        return tuple(sorted((*_ADMIN_ERRORS, *(_BODY_ERRORS if with_body else ()))))
    if path == "/readyz":
        return (*_PUBLIC_ERRORS, 503)
    if path == "/metrics":
        return (*_PUBLIC_ERRORS, 401)
    return _PUBLIC_ERRORS


def _error_responses(path: str, method: str) -> dict[str, Any]:
    ref = "#/components/schemas/" + ("AdminError" if path.startswith("/admin") else "Error")
    return {
        str(code): {
            "description": _REASONS[code],
            "content": {"application/json": {"schema": {"$ref": ref}}},
        }
        for code in _errors_for(path, method)
    }


def _document(path: str, method: str, op: dict[str, Any]) -> None:
    responses: dict[str, Any] = op.setdefault("responses", {})
    errors = _error_responses(path, method)
    for code, answer in errors.items():
        responses.setdefault(code, answer)
    if "422" in responses and "HTTPValidationError" in str(responses["422"]):
        if "422" in errors:
            responses["422"] = errors["422"]
        else:  # FastAPI's own; the tenant API answers a bad field with 400
            del responses["422"]
    if path.startswith(("/v1/", "/admin")):
        op["security"] = [{"bearer": []}]
    if path in _COMPLETIONS and method == "post":
        op.setdefault("parameters", []).extend(_tag_headers())
        ok = responses.setdefault("200", {"description": "Successful Response"})
        ok["content"] = {
            "application/json": {"schema": {"type": "object"}},
            "text/event-stream": {"schema": {"type": "string"}},
        }
        ok["description"] = "The completion (`text/event-stream` when `stream` is true)"
    if path == _IMAGES and method == "post":
        op.setdefault("parameters", []).extend(_tag_headers())
    if path == "/admin/reports":
        responses["200"] = {
            "description": "The report as JSON, CSV or HTML (`format`)",
            "content": {
                "application/json": {"schema": {"type": "object"}},
                "text/csv; charset=utf-8": {"schema": {"type": "string"}},
                "text/html; charset=utf-8": {"schema": {"type": "string"}},
            },
        }
    if path == "/metrics":
        responses["200"] = {
            "description": "Prometheus text exposition format",
            "content": {"text/plain; version=0.0.4": {"schema": {"type": "string"}}},
        }


def honest_openapi(app: FastAPI) -> dict[str, Any]:
    """The app's OpenAPI document with every answer documented (built once, then cached)."""
    if app.openapi_schema is not None:
        return app.openapi_schema
    schema = get_openapi(
        title=app.title, version=app.version, description=app.description, routes=app.routes
    )
    components = schema.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    schemas.update(_SCHEMAS)
    for body in ("ChatCompletionRequest", "CompletionRequest", "ImageGenerationRequest"):
        if body in schemas:
            schemas[body]["properties"]["metadata"] = _metadata()
    for unused in ("HTTPValidationError", "ValidationError"):
        schemas.pop(unused, None)
    components["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
    for path, item in schema.get("paths", {}).items():
        for method, op in item.items():
            _document(path, method, op)
    app.openapi_schema = schema
    return schema


def install_openapi(app: FastAPI) -> None:
    """Serve `honest_openapi(app)` at `/openapi.json`."""
    app.openapi = lambda: honest_openapi(app)  # type: ignore[method-assign]
