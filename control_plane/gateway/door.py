"""The door: what the gateway makes of an accepted request before it is queued.

Rule: the job carries the prompt tokens as estimated at the door (the worker's own count
replaces it when the answer reports usage), the requested `max_tokens` or the deployment's
default, the tier clamped to the tenant's, and SLO targets that a request may only relax
(`tags.relax`) from its node's defaults over the operator's. A request without `max_tokens`
is sent to the worker with the default the scheduler assumed (at least its `min_tokens`), so
the bound the scheduler plans with is the worker's too — unless the prompt may come near the
end of the model's context (a text prompt's count is an estimate: one that could be four times
longer than estimated): then nothing is injected, the worker fills the room as vLLM does, and
the scheduler assumes that room. A request the context surely cannot hold is refused here
(`check_context`), as the worker would refuse it once queued.
Nothing else of the body reaches the job: `min_tokens`, `ignore_eos` and the like are only
forwarded. A request without an `X-Arbiter-Task` tag gets the rule tagger's task type
(`perception.tagger`, tens of microseconds) when `ARBITER_TAG_TASKS` is on (the default), and,
with `ARBITER_TASK_SLO`, H-MAS Table 6's targets as the last level of the SLO precedence.
"""

from __future__ import annotations

import uuid

from control_plane.core.job import Job, Slo
from control_plane.gateway.deps import GatewayDeps, ModelEntry
from control_plane.gateway.errors import ApiError
from control_plane.gateway.flight import Flight
from control_plane.gateway.identity import NodeInfo, SloDefaults
from control_plane.gateway.proxy import upstream_payload
from control_plane.gateway.schemas import ChatCompletionRequest, CompletionRequest
from control_plane.gateway.tags import RequestTags, clamp_tier, relax, strip_tags
from control_plane.gateway.tokens import estimate_prompt
from control_plane.perception.tagger import prompt_text, tag
from control_plane.perception.tasks import task_slo

Body = ChatCompletionRequest | CompletionRequest


def build_flight(
    d: GatewayDeps,
    body: Body,
    tags: RequestTags,
    node: NodeInfo,
    model: ModelEntry,
    received: float,
) -> Flight:
    """The flight of an accepted request: its job (see the module docstring) and payload."""
    n_in, images = estimate_prompt(body, model.image_rule, d.settings.image_hosts)
    requested, exact = body.requested_max_tokens(), _token_ids(body)
    check_context(model, body, n_in, exact, requested, images)
    default = max(d.settings.default_max_tokens, body.min_tokens or 0)
    room = _room(model, n_in, exact)
    inject = requested is None and (room is None or room >= default)
    max_tokens = requested or (default if inject else _fill(model, n_in))
    raw = body.model_dump(exclude_none=True, exclude_unset=True)
    task = tags.task
    if task is None and d.settings.tag_tasks:
        text = prompt_text(raw)
        task = tag(text) if text else None
    slo = slo_for(d, node, tags)
    if task is not None and d.settings.task_slo:
        slo = _with_task_slo(slo, task)
    job = door_job(node, tags, model, body.model, received, n_in, max_tokens, task, slo)
    sent = requested if requested is not None else (max_tokens if inject else 1)
    job.min_context = _min_context(model, n_in, sent)
    raw["metadata"] = strip_tags(body.metadata)
    if inject:
        raw["max_tokens"] = max_tokens
    options = body.stream_options.model_dump(exclude_none=True) if body.stream_options else None
    return Flight(
        job=job,
        node=node,
        chat=isinstance(body, ChatCompletionRequest),
        payload=upstream_payload(
            raw,
            None,
            continuous=bool(body.stream and (options or {}).get("continuous_usage_stats")),
        ),
        received_at=received,
        client_stream_options=options,
    )


def door_job(
    node: NodeInfo,
    tags: RequestTags,
    model: ModelEntry,
    model_name: str,
    received: float,
    n_in: int,
    max_tokens: int,
    task: str | None,
    slo: Slo,
) -> Job:
    """The scheduler's view of a request the door accepted (a fresh id; the workflow the
    agent code named, or a new one)."""
    return Job(
        id=f"req-{uuid.uuid4().hex}",
        tenant=node.tenant.name,
        app=node.app,
        agent=node.agent,
        model=model_name,
        arrival=received,
        n_in=n_in,
        max_tokens=max_tokens,
        workflow=tags.workflow or f"wf-{uuid.uuid4().hex[:16]}",
        upstream=tags.upstream,
        task=task,
        tier=clamp_tier(node.tier, tags.priority),
        slo=slo,
        unit_factor=model.unit_factor,
    )


def check_context(
    model: ModelEntry,
    body: Body,
    n_in: int,
    exact: bool,
    requested: int | None,
    images: int = 0,
) -> None:
    """Refuse what every vLLM refuses once queued — before the request queues, takes a slot
    and is charged: `max_tokens` past the longest context a worker of the model reports, or
    a prompt given as token ids (`exact`: its count is exact) that fills it, leaving no room for one
    token, or images that alone fill it (`images`: the tokens they surely cost, as counted by
    the model's rule). A prompt that fits with less room than `max_tokens` asks for is left to
    the worker (vLLM releases differ: some lower `max_tokens` to the room, some refuse), and
    so is any text prompt (its count is an estimate)."""
    limit = model.longest_context
    if limit is None:
        return
    if requested is not None and requested > limit:
        field = "max_completion_tokens" if getattr(body, "max_completion_tokens", None) else None
        raise _too_long(limit, f"{requested} output tokens", field or "max_tokens")
    if exact and n_in >= limit:  # a full context leaves no room for one token
        raise _too_long(limit, f"a prompt of {n_in} tokens", "prompt")
    if images >= limit:
        raise _too_long(limit, f"images of at least {images} tokens", "messages")


def _too_long(limit: int, asked: str, param: str) -> ApiError:
    return ApiError(
        400,
        f"This model's maximum context length is {limit} tokens; the request asks for "
        f"{asked}. Reduce `{param}`.",
        code="context_length_exceeded",
        param=param,
    )


def _room(model: ModelEntry, n_in: int, exact: bool) -> int | None:
    """Output tokens the context surely has left after the prompt (None: unknown model
    length); an estimated prompt counts four times its estimate."""
    if model.max_model_len is None:
        return None
    return model.max_model_len - (n_in if exact else 4 * n_in)


def _min_context(model: ModelEntry, n_in: int, sent: int) -> int | None:
    """The context the request needs — its prompt (estimated for a text prompt) plus the
    `max_tokens` sent (1 when none is: vLLM fills the room) — when that is more than the
    shortest context among its model's workers: a shorter one would refuse it (a prompt or
    `max_tokens` past its context) or cut its answer short (vLLM lowers `max_tokens` to the
    room)."""
    if model.max_model_len is None:
        return None
    need = n_in + sent
    return need if need > model.max_model_len else None


def _fill(model: ModelEntry, n_in: int) -> int:
    """What vLLM generates at most when no bound is sent: the room after the prompt."""
    assert model.max_model_len is not None  # only called when the room is known
    return max(1, model.max_model_len - n_in)


def _token_ids(body: Body) -> bool:
    prompt = getattr(body, "prompt", None)
    return isinstance(prompt, list) and bool(prompt) and not isinstance(prompt[0], str)


def _with_task_slo(slo: Slo, task: str) -> Slo:
    """Table 6's targets where neither the request, its node nor the operator set one."""
    base = task_slo(task)
    if base is None:
        return slo
    return Slo(
        ttft_s=slo.ttft_s if slo.ttft_s is not None else base.ttft_s,
        tpot_s=slo.tpot_s if slo.tpot_s is not None else base.tpot_s,
        e2e_s=slo.e2e_s,
    )


def slo_for(d: GatewayDeps, node: NodeInfo, tags: RequestTags) -> Slo:
    """A request's SLO targets: its node's defaults over the operator's, relaxed by its tags."""
    return _slo(node.slo.over(d.knobs.slo_defaults), tags)


def _slo(defaults: SloDefaults, tags: RequestTags) -> Slo:
    def sec(ms: float | None) -> float | None:
        return None if ms is None else ms / 1000.0

    return Slo(
        ttft_s=sec(relax(defaults.ttft_ms, tags.slo_ttft_ms)),
        tpot_s=sec(relax(defaults.tpot_ms, tags.slo_tpot_ms)),
        e2e_s=sec(relax(defaults.e2e_ms, tags.slo_e2e_ms)),
    )
