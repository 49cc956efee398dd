"""The Streamlit operator console: live fairness, workflows, policy and knobs.
May import: nothing of `control_plane`, `storage` or `workers`; it talks to the admin API
over HTTP only.
"""
