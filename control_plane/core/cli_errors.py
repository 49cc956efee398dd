"""Operator mistakes on the command line: one line on stderr naming the field, exit status 2.

`user_errors()` turns the project's user-input errors (an unknown plug-in name, invalid
plug-in params, a malformed scenario file, bad settings, a value storage refuses, a malformed
repeated option) into `error: <field>: <what is wrong and what is allowed>` and `typer.Exit(2)`.
A `UserErrorGroup` applies it around every `arbiter` command, so a command that forgets to check
still gives one line instead of a traceback; commands check up front, before starting anything,
to name the flag themselves. Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import typer
from typer._click.core import Context  # typer ≥ 0.26 vendors click; its groups take this
from typer.core import TyperGroup

from control_plane.core.plugins import PluginParamsError, UnknownPluginError


def unwritable(path: Path) -> str | None:
    """Why a file or folder could not be made at `path` (a file on the way, a folder that
    refuses writes); None when it can. The nearest existing folder is probed with a temporary
    file, removed at once, so nothing is left behind and what permission bits do not say is
    seen too (root, a read-only mount, /proc)."""
    try:
        return _unwritable(path)
    except OSError as exc:  # a folder on the way this user may not look into
        return f"{_closed_folder(path)} is not open to this user ({exc.strerror or exc})"


def _closed_folder(path: Path) -> Path:
    """The first folder from the root down whose entries cannot be looked at."""
    absolute = path.absolute()
    for step in [*reversed(absolute.parents), absolute]:
        try:
            step.stat()
        except PermissionError:
            return step.parent
        except OSError:
            break
    return absolute.parent


def is_file(path: Path) -> bool:
    """True when something other than a folder is at `path`; False where it cannot be seen
    (`unwritable` then says why)."""
    try:
        return path.exists() and not path.is_dir()
    except OSError:
        return False


def is_folder(path: Path) -> bool:
    """`path.is_dir()`, False where it cannot be seen (`unwritable` then says why)."""
    try:
        return path.is_dir()
    except OSError:
        return False


def _unwritable(path: Path) -> str | None:
    existing = path.absolute()
    while not existing.exists():
        if existing.is_symlink():  # a dangling link does not exist, yet nothing is made there
            return f"{existing} is a link to {os.readlink(existing)}, which does not exist"
        existing = existing.parent
    if not existing.is_dir():
        return f"{existing} is a file, not a directory"
    try:
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as exc:
        return f"{existing} is not writable ({exc.strerror or exc})"
    return None


class OptionError(ValueError):
    """A command-line option's value is malformed; the message names the option and the form."""


USER_ERRORS: tuple[type[Exception], ...] = (UnknownPluginError, PluginParamsError, OptionError)
"""Errors caused by what the operator typed, never by a bug (those keep their traceback); the
command line adds the scenario, settings and storage errors (`control_plane.cli`)."""


@contextmanager
def user_errors(
    field: str = "", errors: tuple[type[Exception], ...] = USER_ERRORS
) -> Iterator[None]:
    """Run the block; one of `errors` becomes `error: [field: ]message` and exit status 2
    (one line per entry of its `lines`, when it has them, like `SettingsError`)."""
    try:
        yield
    except errors as exc:
        prefix = f"{field}: " if field else ""
        for line in getattr(exc, "lines", None) or [str(exc)]:
            typer.echo(f"error: {prefix}{' '.join(str(line).split())}", err=True)
        raise typer.Exit(2) from None


class UserErrorGroup(TyperGroup):
    """A command group whose every sub-command runs inside `user_errors(errors=ERRORS)`,
    except the long-running services in `SERVICES`: what fails while a service runs (a bad
    knob read from Redis at takeover, say) is not a typo on its command line, so it keeps its
    traceback (their flags and settings are checked before they start)."""

    ERRORS: tuple[type[Exception], ...] = USER_ERRORS
    SERVICES: frozenset[str] = frozenset()

    def invoke(self, ctx: Context) -> Any:
        # the sub-command's name, before the group resolves it (typer's click keeps it private)
        args: list[str] = list(getattr(ctx, "_protected_args", None) or [])
        if args and args[0] in self.SERVICES:
            return super().invoke(ctx)
        with user_errors(errors=self.ERRORS):
            return super().invoke(ctx)


def positive(value: float | None) -> float | None:
    """Typer callback: a finite number > 0 (or unset), else a usage error naming the option."""
    if value is not None and not (math.isfinite(value) and value > 0):
        raise typer.BadParameter(f"must be a finite number > 0, got {value}")
    return value


def in_range(low: float, high: float) -> Callable[[float | None], float | None]:
    """Typer callback: a number from `low` to `high` (or unset), else a usage error."""

    def check(value: float | None) -> float | None:
        if value is not None and not low <= value <= high:
            raise typer.BadParameter(f"must be a number from {low:g} to {high:g}, got {value}")
        return value

    return check
