"""The gateway: the OpenAI-compatible door (its schemas, bounds and OpenAI-shaped errors),
tenant identity and limits, the request's flight (submit, wait for a grant, proxy the stream to
the worker, report progress and completion), its metrics and caches.
May import: `core`, `settings`, `state` and `storage`.
"""
