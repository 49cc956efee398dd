"""The image door: the job is sized by the model's generation rule (n · steps output units,
exact), priced by its factor, and the worker's usage — not what a hostile worker claims beyond
the bounds — replaces the estimate."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from control_plane.contracts.events import WorkerFailed
from control_plane.contracts.grants import Grant
from control_plane.gateway.deps import ModelEntry
from control_plane.gateway.errors import ApiError
from control_plane.gateway.images import (
    ImageGenerationRequest,
    answer_images,
    build_image_flight,
    read_images,
    refuse_image_model,
)
from control_plane.gateway.tags import RequestTags
from tests.control_plane.gateway.test_door import NODE, deps
from workers.engine.diffusion import GenerationRule

IMAGE = ModelEntry("sd", None, 0.28, kind="image", generation=GenerationRule(steps=30))
TEXT = ModelEntry("llama", 8192, 1.0, longest_context=8192)


def flight(body: dict[str, Any], model: ModelEntry = IMAGE) -> Any:
    parsed = ImageGenerationRequest.model_validate({"model": model.name, **body})
    return build_image_flight(deps(), parsed, RequestTags(), NODE, model, 0.0)


def test_job_is_n_times_steps_units_priced_by_the_models_factor() -> None:
    f = flight(
        {"prompt": "x" * 40, "n": 3, "metadata": {"k": "v"}, "quality": "hd", "priority": -9,
         "num_inference_steps": 1000}
    )  # fmt: skip
    assert (f.job.n_in, f.job.max_tokens, f.job.unit_factor) == (10, 90, 0.28)
    assert f.endpoint == "/v1/images/generations"
    assert f.read_timeout_s == deps().settings.upstream_image_timeout_s  # no byte until done
    assert f.payload == {"model": "sd", "prompt": "x" * 40, "n": 3, "size": "1024x1024",
                         "quality": "hd"}  # fmt: skip


def test_wrong_model_kind_size_or_stream_is_a_400_naming_the_field() -> None:
    for body, model, param in [
        ({"prompt": "a"}, TEXT, "model"),
        ({"prompt": "a", "size": "512x512"}, IMAGE, "size"),
        ({"prompt": "a", "stream": True}, IMAGE, "stream"),
        ({"prompt": "   "}, IMAGE, "prompt"),
        (
            {"prompt": "x" * 4 * 2000},
            ModelEntry("sd", 1024, 1.0, kind="image", longest_context=1024),
            "prompt",
        ),
    ]:
        with pytest.raises(ApiError) as err:
            flight(body, model)
        assert err.value.status == 400 and err.value.param == param
    with pytest.raises(ApiError) as text_err:
        refuse_image_model(IMAGE)
    assert text_err.value.param == "model"
    refuse_image_model(TEXT)


class _Resp:
    def __init__(self, body: Any) -> None:
        self.raw = orjson.dumps(body)

    async def read(self) -> bytes:
        return self.raw

    def release(self) -> None:
        pass


async def test_usage_replaces_the_estimate_unless_it_is_not_a_sane_count() -> None:
    f = flight({"prompt": "a cat", "n": 2})
    body = {"data": [{"b64_json": "AA"}] * 2, "usage": {"input_tokens": 3, "output_tokens": 60}}
    await read_images(f, _Resp(body))  # type: ignore[arg-type]
    assert (f.stats.n_in, f.stats.n_out, f.images) == (3, 60, 2)
    hostile = flight({"prompt": "a cat", "n": 2})
    bad = {"data": [{}], "usage": {"input_tokens": -5, "output_tokens": 2**40}}
    await read_images(hostile, _Resp(bad))  # type: ignore[arg-type]
    assert (hostile.stats.n_in, hostile.stats.n_out) == (hostile.job.n_in, 60)
    event = hostile.completion_event("ok")
    assert event.images == 1 and event.n_out == 60
    with pytest.raises(ValueError):
        await read_images(flight({"prompt": "a"}), _Resp({"usage": {}}))  # type: ignore[arg-type]


async def test_a_worker_that_fails_the_answer_is_reported_failed() -> None:
    """As after a failed text answer: the scheduler must rest the worker (`WorkerFailed`), and
    the request ends `error` with a 502 naming the worker's failure."""
    f = flight({"prompt": "a cat"})
    f.grant = Grant(f.id, "w7", "http://w7", 0.0)
    emitted: list[WorkerFailed] = []
    ended: list[tuple[str, str | None]] = []

    async def finish(_: Any, status: str, error: str | None) -> None:
        ended.append((status, error))

    with pytest.raises(ApiError) as refused:
        await answer_images(f, _Resp({"no": "data"}), finish, emitted.append)  # type: ignore[arg-type]
    assert refused.value.status == 502 and refused.value.code == "worker_failed"
    assert [(e.id, e.worker) for e in emitted] == [(f.id, "w7")]
    assert [status for status, _ in ended] == ["error"]
