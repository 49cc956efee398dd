"""The door: the output bound the scheduler plans with is the worker's, and nothing of the body
beyond what a live scheduler may see reaches the job (no true output length)."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace
from typing import Any, cast

import pytest

from control_plane.contracts.requests import Envelope, encode_envelope
from control_plane.core.job import Job
from control_plane.gateway.deps import GatewayDeps, ModelEntry
from control_plane.gateway.door import build_flight
from control_plane.gateway.errors import ApiError
from control_plane.gateway.identity import NodeInfo, TenantInfo
from control_plane.gateway.knobs import GatewayKnobs
from control_plane.gateway.schemas import ChatCompletionRequest, CompletionRequest
from control_plane.gateway.tags import RequestTags
from control_plane.settings import Settings

NODE = NodeInfo(TenantInfo("acme"), "app", "agent")
JOB_FIELDS = {
    "id", "tenant", "arrival", "n_in", "max_tokens", "app", "agent", "model", "seq", "workflow",
    "upstream", "task", "tier", "slo", "unit_factor", "predicted_out", "workflow_start", "n_out",
    "dispatched_at", "worker", "min_context",
}  # fmt: skip


def deps(default_max_tokens: int = 512) -> GatewayDeps:
    settings = Settings(default_max_tokens=default_max_tokens)
    return cast(GatewayDeps, SimpleNamespace(settings=settings, knobs=GatewayKnobs()))


def flight_of(body: dict[str, Any], max_model_len: int | None = None, chat: bool = False) -> Any:
    parsed = (
        ChatCompletionRequest.model_validate(body)
        if chat
        else CompletionRequest.model_validate(body)
    )
    model = ModelEntry("m", max_model_len, 1.0, longest_context=max_model_len)
    return build_flight(deps(), parsed, RequestTags(), NODE, model, 0.0)


def test_an_omitted_max_tokens_is_the_default_for_scheduler_and_worker_alike() -> None:
    flight = flight_of({"model": "m", "prompt": "hello"})
    assert flight.job.max_tokens == flight.payload["max_tokens"] == 512
    chat = flight_of({"model": "m", "messages": [{"role": "user", "content": "hi"}]}, chat=True)
    assert chat.job.max_tokens == chat.payload["max_tokens"] == 512


def test_near_the_end_of_the_context_the_worker_fills_the_room() -> None:
    exact = flight_of({"model": "m", "prompt": [1] * 300}, max_model_len=400)
    assert exact.job.n_in == 300 and exact.job.max_tokens == 100  # what vLLM will allow
    assert "max_tokens" not in exact.payload  # nothing injected that vLLM could refuse
    roomy = flight_of({"model": "m", "prompt": [1] * 300}, max_model_len=4096)
    assert roomy.job.max_tokens == roomy.payload["max_tokens"] == 512
    # a text prompt's count is an estimate: it is given four times its estimate of room
    text = flight_of({"model": "m", "prompt": "word " * 800}, max_model_len=2048)
    assert "max_tokens" not in text.payload
    assert text.job.n_in == 1000 and text.job.max_tokens == 2048 - 1000  # vLLM fills the room
    fits = flight_of({"model": "m", "prompt": "word " * 100}, max_model_len=4096)
    assert fits.job.max_tokens == fits.payload["max_tokens"] == 512


def _refusal(body: dict[str, Any], max_model_len: int | None, chat: bool = False) -> ApiError:
    with pytest.raises(ApiError) as refused:
        flight_of(body, max_model_len, chat)
    return refused.value


def test_what_the_context_surely_cannot_hold_is_refused_at_the_door() -> None:
    """Before, vLLM refused it once it had queued, taken a slot and been charged."""
    too_many = _refusal({"model": "m", "prompt": "x", "max_tokens": 700}, 400)
    assert (too_many.status, too_many.code, too_many.param) == (
        400, "context_length_exceeded", "max_tokens",
    )  # fmt: skip
    assert "maximum context length is 400 tokens" in too_many.message
    full = _refusal({"model": "m", "prompt": [1] * 400}, 400)  # no room for one token
    assert full.param == "prompt" and "a prompt of 400 tokens" in full.message
    assert _refusal({"model": "m", "prompt": [1] * 400, "max_tokens": 1}, 400).param == "prompt"
    chat = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    new = _refusal({**chat, "max_completion_tokens": 401}, 400, chat=True)
    assert new.param == "max_completion_tokens"


def test_only_what_no_worker_can_hold_is_refused() -> None:
    """Workers of one model with different contexts: past the shortest, a longer one may
    still take it (the job says what it needs: placement sends it only there); past the
    longest, none can."""
    model = ModelEntry("m", 8_192, 1.0, longest_context=32_768)
    body = CompletionRequest.model_validate({"model": "m", "prompt": "x", "max_tokens": 10_000})
    flight = build_flight(deps(), body, RequestTags(), NODE, model, 0.0)
    assert (flight.job.max_tokens, flight.job.min_context) == (10_000, 10_001)
    over = CompletionRequest.model_validate({"model": "m", "prompt": "x", "max_tokens": 40_000})
    with pytest.raises(ApiError, match="maximum context length is 32768"):
        build_flight(deps(), over, RequestTags(), NODE, model, 0.0)


def test_the_context_a_job_needs_is_named_only_past_the_shortest() -> None:
    model = ModelEntry("m", 8_192, 1.0, longest_context=32_768)

    def need(body: dict[str, Any]) -> int | None:
        parsed = CompletionRequest.model_validate({"model": "m", **body})
        return build_flight(deps(), parsed, RequestTags(), NODE, model, 0.0).job.min_context

    assert need({"prompt": "x", "max_tokens": 100}) is None  # fits every worker
    assert need({"prompt": "x"}) is None  # the injected default fits the shortest
    assert need({"prompt": list(range(1, 9_001))}) == 9_001  # a prompt past the shortest
    assert need({"prompt": list(range(1, 8_001)), "max_tokens": 500}) == 8_500  # cut short


def test_what_may_fit_is_left_to_the_worker() -> None:
    """Room for one token; a prompt that fits with less room than asked (vLLM releases differ:
    some lower `max_tokens` to the room, some refuse); a text prompt (its count is an
    estimate); an unknown context."""
    assert flight_of({"model": "m", "prompt": [1] * 300, "max_tokens": 100}, 400).job.n_in == 300
    assert flight_of({"model": "m", "prompt": [1] * 300, "max_tokens": 400}, 400).job.n_in == 300
    assert flight_of({"model": "m", "prompt": [1] * 399}, 400).job.max_tokens == 1
    unsure = ModelEntry("m", 400, 1.0)  # a worker's length unknown: it may hold more
    body = CompletionRequest.model_validate({"model": "m", "prompt": "x", "max_tokens": 4_000})
    assert build_flight(deps(), body, RequestTags(), NODE, unsure, 0.0).job.max_tokens == 4_000
    long_text = flight_of({"model": "m", "prompt": "word " * 800, "max_tokens": 399}, 400)
    assert long_text.job.max_tokens == 399
    assert flight_of({"model": "m", "prompt": "x", "max_tokens": 10**6}, None).job.n_in > 0


def test_an_injected_default_is_never_below_min_tokens() -> None:
    flight = flight_of({"model": "m", "prompt": "x", "min_tokens": 900})
    assert flight.job.max_tokens == flight.payload["max_tokens"] == 900


def test_a_requested_bound_is_kept_and_not_rewritten() -> None:
    flight = flight_of({"model": "m", "prompt": "x", "max_tokens": 700}, max_model_len=800)
    assert flight.job.max_tokens == flight.payload["max_tokens"] == 700
    chat = flight_of(
        {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": 9},
        chat=True,
    )
    assert chat.job.max_tokens == 9
    assert "max_tokens" not in chat.payload


def test_min_tokens_and_ignore_eos_are_forwarded_but_never_reach_the_job() -> None:
    body = {"model": "m", "prompt": "x", "max_tokens": 900, "min_tokens": 37, "ignore_eos": False}
    flight = flight_of(body)
    assert flight.payload["min_tokens"] == 37 and flight.payload["ignore_eos"] is False
    assert {f.name for f in dataclasses.fields(Job)} == JOB_FIELDS
    envelope = encode_envelope(Envelope(flight.job, NODE.weights(), "g"))
    assert set(envelope["job"]) == JOB_FIELDS
    assert 37 not in [v for v in envelope["job"].values() if isinstance(v, int)]
    assert flight.job.predicted_out is None  # the scheduler predicts, from history only


def test_an_untagged_request_gets_the_rule_taggers_task() -> None:
    chat = {"model": "m", "messages": [{"role": "user", "content": "Translate 'hi' into German"}]}
    parsed = ChatCompletionRequest.model_validate(chat)
    model = ModelEntry("m", None, 1.0)
    assert build_flight(deps(), parsed, RequestTags(), NODE, model, 0.0).job.task == "Translation"
    tagged = build_flight(deps(), parsed, RequestTags(task="QA"), NODE, model, 0.0)
    assert tagged.job.task == "QA"  # the client's tag wins
    assert flight_of({"model": "m", "prompt": [1, 2, 3]}).job.task is None  # no text to read
    off = cast(
        GatewayDeps,
        SimpleNamespace(settings=Settings(tag_tasks=False), knobs=GatewayKnobs()),
    )
    assert build_flight(off, parsed, RequestTags(), NODE, model, 0.0).job.task is None


def test_table_6_targets_are_the_last_resort_when_enabled() -> None:
    body = CompletionRequest.model_validate({"model": "m", "prompt": "Summarize this memo: ..."})
    model = ModelEntry("m", None, 1.0)
    on = cast(GatewayDeps, SimpleNamespace(settings=Settings(task_slo=True), knobs=GatewayKnobs()))
    job = build_flight(on, body, RequestTags(), NODE, model, 0.0).job
    assert job.task == "Summarization"
    assert (job.slo.ttft_s, job.slo.tpot_s) == (7.0, 0.11)  # importance 0.75: factor 1
    assert not build_flight(deps(), body, RequestTags(), NODE, model, 0.0).job.slo.is_set()
