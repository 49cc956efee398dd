"""The HTTP surface: the FastAPI app that mounts the gateway's OpenAI routes and the admin API
(tenancy, keys, knobs, workers, reports, live state), authentication, health and OpenAPI.
May import: `core`, the plug-in registries, `settings`, `state`, `gateway` and `storage`.
"""
