"""Arbiter's simulated vLLM worker: vLLM's OpenAI HTTP surface driven by the engine model.

``create_app(SimConfig(...))`` builds the ASGI app; ``python -m workers.sim --port P`` or
``arbiter worker sim --port P`` serves it. Module map: ``requests`` (validation, vLLM's
errors), ``tokens`` (the token-counting rule), ``outputs`` (answer lengths and text),
``driver`` (engine on the wall clock), ``chunks`` (vLLM's SSE/JSON shapes), ``metrics``
(``vllm:*`` Prometheus names), ``worker`` and ``app`` (HTTP), ``bench`` (``sim-bench``).
"""
