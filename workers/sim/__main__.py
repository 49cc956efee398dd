"""``python -m workers.sim --port P ...``: the ``sim`` command without the ``arbiter`` wrapper."""

from __future__ import annotations

import typer

from workers.sim.cli import sim

if __name__ == "__main__":
    app = typer.Typer(add_completion=False, pretty_exceptions_show_locals=False)
    app.command()(sim)
    app()
