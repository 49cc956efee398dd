"""The simulated worker's state and its generation endpoints (the token hot path).

A request is validated (``workers.sim.requests``), its answer decided (``workers.sim.outputs``),
then added to the engine; the handler writes what the engine delivers. Each engine step becomes
one SSE chunk per request; when the handler wakes up to several queued chunks it sends them in
one write. A client that disconnects aborts its request in the engine, which frees its KV
blocks at once. Fault injection is described in :class:`workers.sim.config.SimConfig`.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import os
import random
from typing import Any

from workers.engine import EngineConfig, LatencyProfile, load_profile
from workers.sim.asgi import (
    JSON,
    Receive,
    Scope,
    Send,
    header,
    send_bytes,
    start_stream,
    wait_disconnect,
)
from workers.sim.chunks import DONE, ChunkEncoder, full_response
from workers.sim.config import SimConfig
from workers.sim.driver import EngineDriver, TokenStream
from workers.sim.errors import bad_request, internal_error
from workers.sim.images import generate, parse_image_request, send_answer
from workers.sim.metrics import EngineGauges, SimMetrics
from workers.sim.outputs import OutputPlan, plan_output
from workers.sim.requests import GenerationRequest, Kind, parse_generation

DIE_EXIT_CODE = 3


async def _write(send: Send, parts: list[bytes], *, more: bool) -> None:
    await send({"type": "http.response.body", "body": b"".join(parts), "more_body": more})


def engine_config(profile: LatencyProfile, config: SimConfig) -> EngineConfig:
    """The profile's engine defaults with the worker's overrides."""
    overrides: dict[str, Any] = {"scheduling": config.scheduling_policy}
    for key in ("max_num_seqs", "max_num_batched_tokens", "kv_tokens"):
        if (value := getattr(config, key)) is not None:
            overrides[key] = value
    return EngineConfig.from_profile(profile, **overrides)


class SimWorker:
    """One simulated vLLM server: profile, engine driver, metrics and fault-injection state."""

    def __init__(self, config: SimConfig) -> None:
        self.config = config
        self.profile: LatencyProfile = load_profile(config.profile)
        self.served_model = config.served_model_name or self.profile.model.name
        self.max_model_len = config.max_model_len or self.profile.model.max_model_len
        self.engine_config = engine_config(self.profile, config)
        digest = hashlib.sha256(config.model_dump_json().encode()).hexdigest()[:8]
        self.fingerprint = f"vllm-sim-{digest}"
        self.metrics = SimMetrics(
            self.served_model, self.max_model_len, self._gauges, self._cache_info()
        )
        self.driver = EngineDriver(
            self.profile,
            self.engine_config,
            speed=config.speed,
            seed=config.seed,
            metrics=self.metrics,
        )
        self._index = itertools.count()
        self.tokens_streamed = 0
        self._stall_until = 0.0

    def _gauges(self) -> EngineGauges:
        return self.driver.gauges()

    def _cache_info(self) -> dict[str, str]:
        ec = self.engine_config
        return {
            "block_size": str(ec.block_size),
            "cache_dtype": "auto",
            "enable_prefix_caching": "False",
            "gpu_memory_utilization": "0.9",
            "num_cpu_blocks": "None",
            "num_gpu_blocks": str(ec.num_blocks),
            "num_gpu_blocks_override": "None",
            "kv_cache_size_tokens": str(ec.num_blocks * ec.block_size),
        }

    # --- request entry ----------------------------------------------------------------------
    def validate(self, kind: Kind, body: dict[str, Any], scope: Scope) -> GenerationRequest:
        """Validate a generation ``body``; raises ``SimHTTPError`` where vLLM answers an error."""
        if self.profile.model.generation is not None:
            raise bad_request(
                f"The model {self.served_model!r} generates images: use /v1/images/generations."
            )
        return parse_generation(
            kind,
            body,
            served_model=self.served_model,
            max_model_len=self.max_model_len,
            request_id=header(scope, b"x-request-id"),
            priority_header=header(scope, b"x-vllm-priority"),
            image_rule=self.profile.model.image_tokens,
        )

    async def serve_images(self, body: dict[str, Any], receive: Receive, send: Send) -> None:
        """Serve ``POST /v1/images/generations`` (``workers.sim.images``); 400 on a worker whose
        model generates no images."""
        rule = self.profile.model.generation
        if rule is None:
            raise bad_request(f"The model {self.served_model!r} does not generate images.")
        req = parse_image_request(body, self.served_model, rule)
        index = next(self._index)
        cfg = self.config
        if cfg.fail_rate > 0 and random.Random(f"{cfg.seed}:fail:{index}").random() < cfg.fail_rate:
            self.metrics.finished("error", req.prompt_tokens, 0)
            raise internal_error("Simulated engine failure (fault injection).")
        answer = await generate(self.driver, req, rule.steps, str(index), receive)
        if answer is None:
            return
        for k in range(req.n):
            self.metrics.finished("length", req.prompt_tokens if k == 0 else 1, rule.steps)
        await send_answer(send, answer)

    async def serve(self, req: GenerationRequest, receive: Receive, send: Send) -> None:
        """Run a validated request in the engine and write its answer."""
        index = next(self._index)
        cfg = self.config
        if cfg.fail_rate > 0 and random.Random(f"{cfg.seed}:fail:{index}").random() < cfg.fail_rate:
            self.metrics.finished("error", req.n_in, 0)
            raise internal_error("Simulated engine failure (fault injection).")
        plan = plan_output(req, self.profile.output_len, cfg.seed, index)
        try:
            stream = self.driver.submit(str(index), req.n_in, plan.n_out, req.priority)
        except ValueError as exc:
            raise bad_request(str(exc)) from None
        prefix = "chatcmpl-" if req.kind == "chat" else "cmpl-"
        enc = ChunkEncoder(
            kind=req.kind,
            request_id=prefix + (req.request_id or os.urandom(8).hex()),
            model=self.served_model,
            n_in=req.n_in,
            include_usage=req.include_usage,
            continuous=req.continuous_usage,
            fingerprint=self.fingerprint,
        )
        watcher = asyncio.create_task(
            wait_disconnect(receive, lambda: self.driver.abort(stream.id))
        )
        try:
            if req.stream:
                await self._stream(send, stream, enc, plan)
            else:
                await self._full(send, stream, enc, plan)
        finally:
            watcher.cancel()
            if not stream.finished:
                self.driver.abort(stream.id)

    # --- writing ----------------------------------------------------------------------------
    async def _stall(self) -> None:
        if self._stall_until:
            wait = self._stall_until - asyncio.get_running_loop().time()
            if wait > 0:
                await asyncio.sleep(wait)

    def _count(self, n: int) -> str | None:
        """Count streamed tokens; ``"die"`` or ``"stall"`` when a fault triggers now."""
        self.tokens_streamed += n
        cfg = self.config
        if cfg.die_after_tokens is not None and self.tokens_streamed >= cfg.die_after_tokens:
            return "die"
        after = cfg.stall_after_tokens
        if after and not self._stall_until and self.tokens_streamed >= after:
            self._stall_until = asyncio.get_running_loop().time() + cfg.stall_s
            return "stall"
        return None

    def _closing(self, enc: ChunkEncoder, plan: OutputPlan, n_out: int) -> list[bytes]:
        self.metrics.finished(plan.finish, enc.n_in, n_out)
        return [enc.usage_chunk(n_out), DONE] if enc.include_usage else [DONE]

    async def _stream(
        self, send: Send, stream: TokenStream, enc: ChunkEncoder, plan: OutputPlan
    ) -> None:
        await start_stream(send)
        if self.config.die_after_tokens == 0:  # uvicorn has written the headers
            os._exit(DIE_EXIT_CODE)
        sent = 0
        while True:
            batch = await stream.next_batch()
            if not batch:
                return  # aborted: the client is gone
            await self._stall()
            parts = [enc.role_chunk()] if sent == 0 and enc.kind == "chat" else []
            for d in batch:
                text = plan.text(sent, d.n)
                sent += d.n
                if d.finished:
                    parts.append(enc.token_chunk(text, sent, plan.finish, plan.stop_reason))
                    parts.extend(self._closing(enc, plan, sent))
                else:
                    parts.append(enc.token_chunk(text, sent, None, None))
                fault = self._count(d.n)
                if fault is not None:  # write exactly up to this token, then misbehave
                    await _write(send, parts, more=not d.finished)
                    parts = []
                    if fault == "die":
                        os._exit(DIE_EXIT_CODE)
                    await self._stall()
            if parts:
                await _write(send, parts, more=not batch[-1].finished)
            if batch[-1].finished:
                return

    async def _full(
        self, send: Send, stream: TokenStream, enc: ChunkEncoder, plan: OutputPlan
    ) -> None:
        while not stream.finished:
            if not await stream.next_batch():
                return
        n = plan.n_out
        self.metrics.finished(plan.finish, enc.n_in, n)
        body = full_response(enc, plan.text(0, n), n, plan.finish, plan.stop_reason)
        await send_bytes(send, 200, body, JSON)
