"""The one domain error of the state layer, and the guard that produces it."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Coroutine
from typing import Any, ParamSpec, TypeVar

from redis import exceptions as rex

P = ParamSpec("P")
T = TypeVar("T")

# Errors that mean "Redis cannot serve us right now" (down, loading, failing over, full).
# Programming errors (wrong type, bad script) stay ResponseError and surface as bugs.
_UNAVAILABLE: tuple[type[BaseException], ...] = (
    rex.ConnectionError,  # includes BusyLoadingError and MaxConnectionsError
    rex.TimeoutError,
    rex.ReadOnlyError,
    rex.ClusterDownError,  # includes MasterDownError
    rex.TryAgainError,
    rex.OutOfMemoryError,
    OSError,  # socket errors redis-py did not wrap (includes builtin Connection/TimeoutError)
)
_UNAVAILABLE_REPLIES = ("MISCONF ", "NOREPLICAS ", "BUSY ")
"""Replies redis-py raises as a bare `ResponseError` that also mean "cannot serve now": writes
refused while a snapshot cannot be saved (a full disk), too few replicas for
`min-replicas-to-write`, a script running past its time limit. Each clears without a change
of ours, so callers wait and retry as through an outage (the API: 503, not a 500)."""


class StateUnavailable(Exception):
    """Redis is unreachable or cannot serve; retry later (the API answers 503 + Retry-After).

    Every Redis outage-type error raised inside `control_plane.state` leaves it as this one
    exception, with the original as `__cause__`.
    """


class StaleLeader(StateUnavailable):
    """A write fenced by a lease token was refused: a newer leader holds the lease, so the
    caller must stop acting as leader (it is deposed, whatever its own clock says)."""


class KnobChanged(Exception):
    """A knob change made against the value the caller read was refused: the knob changed
    meanwhile (read it again and decide again)."""


_PIPELINE_NOTE = re.compile(r"Command # \d+ \(.*?\) of pipeline caused error: \(?['\"]?", re.S)
"""What redis-py puts before a reply it raises from a pipeline (a MULTI's queued write refused
for MISCONF arrives so, its EXEC answered EXECABORT)."""


def is_unavailable(exc: BaseException) -> bool:
    """True when `exc` is an outage-type Redis error."""
    if isinstance(exc, rex.ResponseError) and _reply(exc).startswith(_UNAVAILABLE_REPLIES):
        return True
    return isinstance(exc, _UNAVAILABLE)


def _reply(exc: rex.ResponseError) -> str:
    """Redis's reply, without the note redis-py adds to a pipeline's."""
    text = str(exc)
    note = _PIPELINE_NOTE.match(text)
    return text[note.end() :] if note else text


def guarded(func: Callable[P, Coroutine[Any, Any, T]]) -> Callable[P, Coroutine[Any, Any, T]]:
    """Decorate an async state method so outage-type errors become `StateUnavailable`."""

    @functools.wraps(func)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return await func(*args, **kwargs)
        except StateUnavailable:
            raise
        except _UNAVAILABLE as exc:
            raise StateUnavailable(f"redis unavailable: {exc}") from exc
        except rex.ResponseError as exc:
            if is_unavailable(exc):
                raise StateUnavailable(f"redis unavailable: {exc}") from exc
            raise

    return wrapper
