"""The `llm` selector's I/O: sends its questions to the configured model and hands back the
replies (the controller itself does no I/O; `control/llm_selector.py` has the rules)."""

from __future__ import annotations

import asyncio
import logging
import time

import httpx

from control_plane.control.llm_selector import (
    LlmSelector,
    Question,
    completions_url,
    reply_text,
    request_body,
)
from control_plane.control.meta import MetaController
from control_plane.core.scheduler_core import SchedulerCore

log = logging.getLogger(__name__)


def worker_url(core: SchedulerCore, model: str) -> str | None:
    """The root URL of a healthy worker serving `model` (the first in registry order)."""
    for slot in core.workers.values():
        view = slot.view()
        if view.serves(model) and view.url:
            return view.url
    return None


class Advisor:
    """Asks each open question of the running `llm` selector once, in the background.

    Guarantees: `poll` never waits on the model; every question sent gets exactly one
    `answer` (the reply's text, or None when the request failed or timed out), so the selector
    falls back to its rules instead of waiting for a reply that will not come.
    """

    def __init__(self, http: httpx.AsyncClient) -> None:
        self.http = http
        self._tasks: set[asyncio.Task[None]] = set()

    def poll(self, core: SchedulerCore) -> None:
        controller = core.controller
        if not isinstance(controller, MetaController):
            return
        selector = controller.selector
        if not isinstance(selector, LlmSelector):
            return
        question = selector.take_question()
        if question is None:
            return
        url = selector.params.url or worker_url(core, selector.params.model)
        task = asyncio.create_task(self._ask(selector, question, url))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _ask(self, selector: LlmSelector, q: Question, url: str | None) -> None:
        text = None
        try:
            if url is None:
                log.warning("llm selector: no healthy worker serves %s", selector.params.model)
            else:
                text = await self._post(selector, q, url)
        except Exception:  # e.g. a malformed llm.url: the question still gets its answer
            log.exception("llm selector: asking %s failed", url)
        finally:
            selector.answer(q.id, text, time.time())

    async def _post(self, selector: LlmSelector, q: Question, url: str) -> str | None:
        params = selector.params
        try:
            r = await self.http.post(
                completions_url(url),
                json=request_body(params, q),
                timeout=params.timeout_s,
            )
            r.raise_for_status()
            return reply_text(r.json())
        except (httpx.HTTPError, ValueError) as exc:
            log.warning("llm selector: asking %s failed: %s", url, exc)
            return None

    async def close(self) -> None:
        """Cancel questions still in flight (the leader is stepping down)."""
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
