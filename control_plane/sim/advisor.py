"""The `llm` selector in the simulator: its questions answered over real HTTP, synchronously.

The simulated clock stands still while the model answers, so the model's latency is not part
of the run (it is small against the controller's period). Without `llm.url` nothing is asked
and the selector falls back to its rules after its timeout, as it would live with no model.
"""

from __future__ import annotations

import logging

import httpx

from control_plane.control.llm_selector import (
    LlmSelector,
    completions_url,
    reply_text,
    request_body,
)
from control_plane.control.meta import MetaController
from control_plane.core.scheduler_core import SchedulerCore

log = logging.getLogger(__name__)


class SimAdvisor:
    """Called after every simulated tick; asks the open question of an `llm` selector, if any.

    Guarantee: each question sent gets exactly one answer (None when the request failed), so
    a dead endpoint costs one fallback per period, never a stuck run."""

    def __init__(self) -> None:
        self._http: httpx.Client | None = None

    def __call__(self, core: SchedulerCore, now: float) -> None:
        controller = core.controller
        if not isinstance(controller, MetaController):
            return
        selector = controller.selector
        url = selector.params.url if isinstance(selector, LlmSelector) else None
        if not isinstance(selector, LlmSelector) or url is None:
            return
        question = selector.take_question()
        if question is None:
            return
        params = selector.params
        self._http = self._http or httpx.Client()
        text = None
        try:
            r = self._http.post(
                completions_url(url),
                json=request_body(params, question),
                timeout=params.timeout_s,
            )
            r.raise_for_status()
            text = reply_text(r.json())
        except Exception as exc:  # any failure is a failed reply, never a stuck run
            log.warning("llm selector: asking %s failed: %s", url, exc)
        selector.answer(question.id, text, now)

    def close(self) -> None:
        if self._http is not None:
            self._http.close()
