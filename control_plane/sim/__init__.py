"""The discrete-event simulator: scenarios, workloads and traces, the virtual clock that drives
`core.SchedulerCore` over `workers.engine` instances, metrics, reports and results.
May import: `core`, the plug-in registries and `workers.engine`; never I/O packages
(`state`, `gateway`, `scheduler`, `recorder`).
"""
