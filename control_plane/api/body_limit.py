"""ASGI middleware refusing bodies over a byte limit with 413 (before any parsing)."""

from __future__ import annotations

from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from control_plane.gateway.errors import ApiError


class BodyTooLarge(StarletteHTTPException):
    """Raised inside the counting receive when the streamed body passes the limit. An HTTP
    exception, so FastAPI's body parsing lets it through as itself (it turns any other error
    raised while reading a body into a 400) and the error handlers answer it as the 413."""

    code = "request_too_large"

    def __init__(self, max_bytes: int) -> None:
        super().__init__(413, f"Request body exceeds {max_bytes} bytes.")


class BodyLimit:
    """Rejects requests whose Content-Length, or streamed body, exceeds `max_bytes`."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope["headers"]:
            if name == b"content-length" and value.isdigit() and int(value) > self.max_bytes:
                await self._refuse(scope, receive, send)
                return
        seen = 0
        limit = self.max_bytes

        async def counting_receive() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise BodyTooLarge(limit)
            return message

        try:
            await self.app(scope, counting_receive, send)
        except BodyTooLarge:
            await self._refuse(scope, receive, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        await too_large(self.max_bytes).response()(scope, receive, send)


def too_large(max_bytes: int) -> ApiError:
    """The refusal of a body over `max_bytes`."""
    return ApiError(413, f"Request body exceeds {max_bytes} bytes.", code="request_too_large")
