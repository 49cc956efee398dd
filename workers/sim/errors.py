"""Errors in vLLM's OpenAI shape: ``{"error": {"message", "type", "param", "code"}}``.

The types and wording follow vLLM 0.32's OpenAI server (``create_error_response`` and its
FastAPI validation handler), so a client cannot tell the simulated worker from the real one by
its errors.
"""

from __future__ import annotations

import json
from typing import Any

import orjson


class SimHTTPError(Exception):
    """An error answered to the client with ``status`` and an OpenAI-shaped JSON body."""

    def __init__(self, status: int, message: str, err_type: str, param: str | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.err_type = err_type
        self.param = param

    def body(self) -> bytes:
        """The JSON body, as vLLM serialises ``ErrorResponse``."""
        return orjson.dumps(
            {
                "error": {
                    "message": self.message,
                    "type": self.err_type,
                    "param": self.param,
                    "code": self.status,
                }
            }
        )


def bad_request(message: str, param: str | None = None, value: Any = None) -> SimHTTPError:
    """400, as vLLM answers a ``VLLMValidationError`` (whose text names parameter and value)."""
    extras = [f"{k}={v}" for k, v in (("parameter", param), ("value", value)) if v is not None]
    if extras:
        message = f"{message} ({', '.join(extras)})"
    return SimHTTPError(400, message, "BadRequestError", param)


def unknown_model(model: str, served: str) -> SimHTTPError:
    """404 for a model name this worker does not serve."""
    return SimHTTPError(
        404,
        f"The model `{model}` does not exist. Valid aliases: {served}.",
        "NotFoundError",
        "model",
    )


def internal_error(message: str) -> SimHTTPError:
    """500, as vLLM answers an engine failure."""
    return SimHTTPError(500, message, "InternalServerError")


class PlainHTTPError(Exception):
    """A routing error that vLLM answers in FastAPI's own shape ``{"detail": ...}``."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail

    def body(self) -> bytes:
        """FastAPI's JSON body."""
        return orjson.dumps({"detail": self.detail})


def _validation(detail: dict[str, Any], param: str) -> SimHTTPError:
    return SimHTTPError(400, f"1 validation error:\n  {detail}", "Bad Request", param)


def _summary(value: Any) -> Any:
    """vLLM's size-bounded stand-in for a rejected input value."""
    if isinstance(value, str):
        return value if len(value) <= 200 else value[:200] + "...[truncated]"
    if isinstance(value, list | tuple | dict):
        return f"<{type(value).__name__} of {len(value)} items>"
    return str(value)


def invalid_json(raw: bytes) -> SimHTTPError:
    """400 for a body that is not JSON, worded like FastAPI's error through vLLM's handler."""
    try:
        json.loads(raw)
        reason, pos = "Invalid JSON", 0
    except json.JSONDecodeError as exc:
        reason, pos = exc.msg, exc.pos
    except UnicodeDecodeError as exc:
        reason, pos = str(exc), 0
    detail = {
        "type": "json_invalid",
        "loc": f"body.{pos}",
        "msg": "JSON decode error",
        "input": "<dict of 0 items>",
        "ctx": {"error": reason},
    }
    return _validation(detail, f"body.{pos}")


def invalid_field(field: str, kind: str, message: str, value: Any) -> SimHTTPError:
    """400 for a body field pydantic would reject (``kind`` is pydantic's error type)."""
    loc = f"body.{field}" if field else "body"
    detail = {"type": kind, "loc": loc, "msg": message, "input": _summary(value)}
    return _validation(detail, loc)
