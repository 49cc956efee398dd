"""Client traffic for the browser test: chat completions through the gateway for each tenant,
sent with the OpenAI client from background threads, so that the console has live SAFI,
service and report rows to show."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Mapping

import openai

APP = "chat"
AGENT = "helper"


class Traffic:
    """Closed-loop senders (`per_tenant` threads per tenant) for `duration_s` seconds or until
    `stop()`. After `stop()` returns every request has finished: `ok` counts the completed
    ones per tenant and `errors` lists every failure (the test expects none)."""

    def __init__(
        self,
        gateway_url: str,
        keys: Mapping[str, str],
        *,
        duration_s: float = 12.0,
        per_tenant: int = 2,
    ) -> None:
        self.gateway_url = gateway_url
        self.keys = dict(keys)
        self.duration_s = duration_s
        self.per_tenant = per_tenant
        self.ok: Counter[str] = Counter()
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []

    def _client(self, tenant: str) -> openai.OpenAI:
        return openai.OpenAI(
            base_url=f"{self.gateway_url}/v1",
            api_key=self.keys[tenant],
            max_retries=0,
            timeout=30.0,
            default_headers={"X-Arbiter-App": APP, "X-Arbiter-Agent": AGENT},
        )

    def start(self) -> None:
        model = self._client(next(iter(self.keys))).models.list().data[0].id
        deadline = time.monotonic() + self.duration_s
        for tenant in self.keys:
            for i in range(self.per_tenant):
                thread = threading.Thread(
                    target=self._send, args=(tenant, model, deadline), name=f"{tenant}-{i}"
                )
                self._threads.append(thread)
                thread.start()

    def _send(self, tenant: str, model: str, deadline: float) -> None:
        client = self._client(tenant)
        while not self._stop.is_set() and time.monotonic() < deadline:
            try:
                client.chat.completions.create(
                    model=model,
                    messages=[{"role": "user", "content": f"hello from {tenant}"}],
                    max_tokens=16,
                )
            except openai.OpenAIError as exc:
                with self._lock:
                    self.errors.append(f"{tenant}: {exc!r}")
                time.sleep(0.5)
            else:
                with self._lock:
                    self.ok[tenant] += 1
        client.close()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(60)
