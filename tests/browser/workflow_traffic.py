"""QA workflows for the browser test, sent live with the OpenAI client as agent code sends
them (the shape of scenarios/kairos-qa.yaml): a router call, then — once it has answered —
a math or a humanities call drawn with probability 0.5 each from a fixed seed, tagged with
the same `X-Arbiter-Workflow` and `X-Arbiter-Upstream: router` (the upstream *agent*, which
is what the gateway and the scheduler read). A few workflows run at once."""

from __future__ import annotations

import random
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import openai

APP = "qa"
SEED = 20240517
EXPERTS = ("math", "humanities")
MAX_TOKENS = {"router": 4, "math": 12, "humanities": 40}
"""Output lengths ordered as the paper's agents are (router ≪ math < humanities)."""


class QaWorkflows:
    """`n` workflows from `parallel` threads; `run()` returns once all have finished.
    `chosen` counts the experts sent, `errors` every failure (the test expects none)."""

    def __init__(self, gateway_url: str, key: str, *, n: int = 200, parallel: int = 6) -> None:
        rng = random.Random(SEED)
        self.plan = [EXPERTS[0] if rng.random() < 0.5 else EXPERTS[1] for _ in range(n)]
        self.parallel = parallel
        self.chosen: Counter[str] = Counter()
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._client = openai.OpenAI(
            base_url=f"{gateway_url}/v1",
            api_key=key,
            max_retries=0,
            timeout=60.0,
            default_headers={"X-Arbiter-App": APP},
        )

    def sent_frequency(self, expert: str) -> float:
        """The share of router calls that led to `expert`, as sent."""
        return self.chosen[expert] / max(1, sum(self.chosen.values()))

    def run(self) -> None:
        model = self._client.models.list().data[0].id
        with ThreadPoolExecutor(self.parallel, thread_name_prefix="qa") as pool:
            list(pool.map(lambda i: self._workflow(model, i), range(len(self.plan))))
        self._client.close()

    def _call(self, model: str, agent: str, workflow: str, upstream: str | None) -> None:
        headers = {"X-Arbiter-Agent": agent, "X-Arbiter-Workflow": workflow}
        if upstream is not None:
            headers["X-Arbiter-Upstream"] = upstream
        self._client.chat.completions.create(
            model=model,
            messages=[{"role": "user", "content": f"{agent}: question of {workflow}"}],
            max_tokens=MAX_TOKENS[agent],
            extra_headers=headers,
        )

    def _workflow(self, model: str, i: int) -> None:
        workflow, expert = f"qa-{i:04d}", self.plan[i]
        try:
            self._call(model, "router", workflow, None)
            self._call(model, expert, workflow, "router")
        except openai.OpenAIError as exc:
            with self._lock:
                self.errors.append(f"{workflow}: {exc!r}")
        else:
            with self._lock:
                self.chosen[expert] += 1
