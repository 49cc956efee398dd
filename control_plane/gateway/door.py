"""The door: what the gateway makes of an accepted request before it is queued.

Rule: the job carries the prompt tokens as estimated at the door (the worker's own count
replaces it when the answer reports usage), the requested `max_tokens` or the deployment's
default, the tier clamped to the tenant's, and SLO targets that a request may only relax
(`tags.relax`) from its node's defaults over the operator's.
"""

from __future__ import annotations

import uuid

from control_plane.core.job import Job, Slo
from control_plane.gateway.deps import GatewayDeps
from control_plane.gateway.flight import Flight
from control_plane.gateway.identity import NodeInfo, SloDefaults
from control_plane.gateway.proxy import upstream_payload
from control_plane.gateway.schemas import ChatCompletionRequest, CompletionRequest
from control_plane.gateway.tags import RequestTags, clamp_tier, relax, strip_tags
from control_plane.gateway.tokens import estimate_prompt_tokens

Body = ChatCompletionRequest | CompletionRequest


def build_flight(
    d: GatewayDeps, body: Body, tags: RequestTags, node: NodeInfo, unit: float, received: float
) -> Flight:
    """The flight of an accepted request: its job (see the module docstring) and payload."""
    n_in = estimate_prompt_tokens(body)
    max_tokens = body.requested_max_tokens() or d.settings.default_max_tokens
    rid = f"req-{uuid.uuid4().hex}"
    job = Job(
        id=rid,
        tenant=node.tenant.name,
        app=node.app,
        agent=node.agent,
        model=body.model,
        arrival=received,
        n_in=n_in,
        max_tokens=max_tokens,
        workflow=tags.workflow or f"wf-{uuid.uuid4().hex[:16]}",
        upstream=tags.upstream,
        task=tags.task,
        tier=clamp_tier(node.tier, tags.priority),
        slo=_slo(node.slo.over(d.knobs.slo_defaults), tags),
        unit_factor=unit,
    )
    raw = body.model_dump(exclude_none=True, exclude_unset=True)
    raw["metadata"] = strip_tags(body.metadata)
    options = body.stream_options.model_dump(exclude_none=True) if body.stream_options else None
    return Flight(
        job=job,
        node=node,
        chat=isinstance(body, ChatCompletionRequest),
        payload=upstream_payload(raw, None),
        received_at=received,
        client_stream_options=options,
    )


def _slo(defaults: SloDefaults, tags: RequestTags) -> Slo:
    def sec(ms: float | None) -> float | None:
        return None if ms is None else ms / 1000.0

    return Slo(
        ttft_s=sec(relax(defaults.ttft_ms, tags.slo_ttft_ms)),
        tpot_s=sec(relax(defaults.tpot_ms, tags.slo_tpot_ms)),
        e2e_s=sec(relax(defaults.e2e_ms, tags.slo_e2e_ms)),
    )
