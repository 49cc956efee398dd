"""The live scheduler process: leader election, rebuild from Redis, the I/O loops that feed
`core.SchedulerCore` (arrivals, events, scrapes, knobs, sweeps) and turn its decisions into
grants; the live `WorkerProbe` (registry record + scraped `vllm:*` metrics).
May import: `core`, the plug-in registries (`policies`, `admission`, `placement`),
`settings` and `state`; `main.py` (the process entry) may also host the recorder.
"""
