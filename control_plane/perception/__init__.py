"""Perception (H-MAS §4.1): what a request is, read from its prompt — the task type (a rule
tagger over the 13 types of H-MAS Table 6) and the per-task SLO template with importance
scaling. Pure and fast enough for the request path (`arbiter bench perception` measures it).
May import: `control_plane.core` only.
"""
