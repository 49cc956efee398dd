"""`python -m workers.vllm COMMAND`: the vLLM `arbiter worker` commands, no control plane needed."""

from __future__ import annotations

import typer

from workers.vllm.cli import register

app = typer.Typer(no_args_is_help=True, pretty_exceptions_show_locals=False)
register(app)

if __name__ == "__main__":
    app()
