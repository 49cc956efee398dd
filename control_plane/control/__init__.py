"""Adaptive control (H-MAS): QoS views of the pool and the meta-controller that picks the
ordering policy (the `auto` policy), with its selectors and guards.

Pure like the scheduler core: no I/O, time comes in as `now`; the core feeds it arrivals and
ends and calls `step` every cycle, on both clocks (docs/algorithms.md §18). Policies are built
through a function the owner injects, so this package needs no registry.
May import: `control_plane.core` only.
"""
