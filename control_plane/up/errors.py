"""The one error `arbiter up` reports to the operator as a reason, not a traceback."""

from __future__ import annotations


class UpError(RuntimeError):
    """A clear, user-facing reason why the deployment could not start."""
