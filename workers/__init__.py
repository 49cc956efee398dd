"""Workers: the simulated vLLM worker (an OpenAI-compatible server over `workers.engine`), the
engine model shared with the simulator, and the real-vLLM launcher and tiny-model tools.
May import: nothing of `control_plane`, `storage` or `console`.
"""
