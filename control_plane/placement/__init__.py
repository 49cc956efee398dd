"""Placement plug-ins: which admitting worker gets the job (least loaded, round robin,
KV-aware), plus their registry.
May import: `control_plane.core` only (the `Placement` interface, job, worker view).
"""
