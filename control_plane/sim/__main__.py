"""`python -m control_plane.sim COMMAND …`: the simulator commands without the `arbiter` wrapper."""

from __future__ import annotations

import typer

from control_plane.sim.cli import register

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_show_locals=False)
register(app)

if __name__ == "__main__":
    app()
