"""Admission plug-ins: whether a worker may take one more job now (capacity fence, Statera),
plus their registry.
May import: `control_plane.core` only (the `Admission` interface, job, worker view).
"""
