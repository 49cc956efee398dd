"""Arbiter's control plane: gateway, scheduler, recorder, simulator, admin API and CLI.

Layers, lowest first (`tests/test_layout.py` enforces that imports only point down):
`core` (the shared scheduling mechanism) → `contracts` (typed messages between processes) →
the plug-ins (`policies`, `admission`, `placement`), the meta-controller (`control`),
`settings`, `gc_freeze` (the services' heap) and `state` (the only Redis code) → the
processes and the simulator (`gateway`, `scheduler`, `recorder`, `sim`, `up`) → `admin`
(services both front ends share) → `api` (the HTTP surface) → the command line (`bench`,
`admin_cli`, then `cli`).
Peers of one layer never import each other; a process's `main.py` is an entry point and may
compose its peers.
May import: `storage` and `workers.engine` below it; never `console`.
"""
