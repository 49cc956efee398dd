"""The recorder process: reads `complete` events from Redis and writes one SQL row per request
(batched, idempotent, dead-lettering what it cannot write), plus fairness rollups.
May import: `core`, `settings`, `state` and `storage`.
"""
