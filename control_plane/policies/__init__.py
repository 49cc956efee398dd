"""Scheduling policies: the plug-ins that order pending jobs (FCFS, RR, VTC, WFQ, HMFS,
ExFairS, EDF, SJF, LLF, two-lane, priority) and their registry, plus the building blocks only
policies use (job queues, counter lift rules, ExFairS credits, SAFI).
May import: `control_plane.core` only (the `Policy` interface, ledger, job, latency model).
"""
