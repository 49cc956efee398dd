"""Free output lengths are drawn from the profile, seeded: same seed and order, same lengths."""

from __future__ import annotations

import httpx

from tests.workers.sim.process import running_sim

BODY = {"prompt": "how long?", "max_tokens": 200}


def lengths(seed: int, n: int = 12) -> list[int]:
    with running_sim("--speed", "1000", "--seed", str(seed)) as sim:
        return [
            httpx.post(f"{sim.root}/v1/completions", json=BODY, timeout=30).json()["usage"][
                "completion_tokens"
            ]
            for _ in range(n)
        ]


def test_lengths_are_deterministic_across_processes() -> None:
    first = lengths(seed=11)
    assert first == lengths(seed=11)
    assert first != lengths(seed=12)
    assert all(1 <= n <= 200 for n in first) and len(set(first)) > 3
