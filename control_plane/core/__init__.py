"""The scheduling mechanism shared by the live scheduler and the simulator.

Owns: the job and its outcome, the ledger (service, windows, virtual counters, ExFairS
accounts), Unified Token pricing, the latency model, the worker view, the plug-in interfaces
(`Policy`, `Admission`, `Placement`) and their one registry type, the `Dispatcher` that composes
them and `SchedulerCore`, the bookkeeping of pending and running jobs both clocks drive.
Rule: no I/O and no clock of its own — time comes in as `now`.
May import: the standard library, pydantic, numpy/scipy, networkx. Never `control_plane.policies`,
`admission`, `placement` (their plug-ins implement what is defined here), nor anything that
does I/O (`state`, `gateway`, `scheduler`, `recorder`, `sim`, `api`).
"""
