"""`python -m control_plane …` is the same as the `arbiter` command."""

from control_plane.cli import main

main()
