"""The `arbiter` command (Typer + rich). Subcommands are registered by the modules that own them."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="arbiter",
    help="Arbiter: fair, SLO-aware scheduling for shared LLM serving.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)
worker_app = typer.Typer(help="Run a worker: simulated vLLM, or a supervised real vLLM server.",
                         no_args_is_help=True)
app.add_typer(worker_app, name="worker")


def _register() -> None:
    from workers.sim import cli as sim_cli
    from workers.vllm import cli as vllm_cli

    sim_cli.register(worker_app)
    vllm_cli.register(worker_app)


def main() -> None:
    """Console-script entry point."""
    _register()
    app()
