"""Image generation through the whole path (real processes, the official OpenAI client's
`images.generate` unchanged): the registry declares the image model (`arbiter up`'s seeding
from the `sd-image-a100` profile), the gateway queues the request as `n · steps` output units
priced by the model's Unified Token factor, the simulated image worker answers in OpenAI's
shape, and the history row records the images, the steps as output units and the unified cost.
Text and image models refuse each other's endpoints with a 400 naming `model`."""

from __future__ import annotations

import base64
import io
import time
from typing import Any

import openai
import pytest
from PIL import Image

from control_plane.core.unified import ModelShape, unified_cost, unit_factor
from tests.support.cluster import Cluster
from workers.engine import load_profile

PROFILE = "sd-image-a100"
MODEL = "sd3-medium"
STEPS = 28


@pytest.fixture
def deployed(cluster: Cluster) -> tuple[Cluster, str, str]:
    keys = cluster.tenants(["acme"])
    cluster.start_worker(profile=PROFILE, speed=50.0)
    cluster.start_worker(profile="tiny-cpu", speed=50.0)
    cluster.start_scheduler()
    return cluster, cluster.start_gateway(), keys["acme"]


def _rows(cluster: Cluster, expected: int, timeout_s: float = 20.0) -> list[Any]:
    db = cluster.database()
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            with db.reader() as r:
                rows = r.requests.list()
            if len(rows) >= expected or time.monotonic() > deadline:
                return rows
            time.sleep(0.2)
    finally:
        db.dispose()


def test_openai_client_generates_images_and_history_records_them(
    deployed: tuple[Cluster, str, str],
) -> None:
    cluster, gw, key = deployed
    client = openai.OpenAI(base_url=f"{gw}/v1", api_key=key, max_retries=0)
    out = client.images.generate(
        model=MODEL, prompt="a lighthouse at dusk, oil painting", n=2, size="1024x1024"
    )
    assert len(out.data) == 2
    png = base64.b64decode(out.data[0].b64_json or "")
    assert Image.open(io.BytesIO(png)).size == (1024, 1024)
    assert out.usage is not None and out.usage.output_tokens == 2 * STEPS
    by_url = client.images.generate(model=MODEL, prompt="a fox", response_format="url")
    assert (by_url.data[0].url or "").startswith("data:image/png;base64,")

    rows = sorted(_rows(cluster, 2), key=lambda row: row.arrival)
    assert [(r.status, r.images, r.n_out) for r in rows] == [("ok", 2, 2 * STEPS), ("ok", 1, STEPS)]
    m = load_profile(PROFILE).model
    factor = unit_factor(ModelShape(m.kind, m.hidden_size, m.num_layers))
    first = rows[0]
    assert first.n_in == out.usage.input_tokens
    assert first.unified_cost == pytest.approx(unified_cost(first.n_in, 2 * STEPS, factor))


def test_wrong_endpoint_size_or_count_is_a_400_naming_the_field(
    deployed: tuple[Cluster, str, str],
) -> None:
    _, gw, key = deployed
    client = openai.OpenAI(base_url=f"{gw}/v1", api_key=key, max_retries=0)
    cases: list[tuple[dict[str, Any], str]] = [
        ({"model": "tiny-llama", "prompt": "a cat"}, "model"),
        ({"model": MODEL, "prompt": "a cat", "size": "512x512"}, "size"),
        ({"model": MODEL, "prompt": "a cat", "n": 11}, "n"),  # the schema's bound
        ({"model": MODEL, "prompt": ""}, "prompt"),
    ]
    for kwargs, param in cases:
        with pytest.raises(openai.BadRequestError) as err:  # a 400, as OpenAI answers
            client.images.generate(**kwargs)
        body = err.value.body
        assert isinstance(body, dict) and body.get("param") == param, (kwargs, body)
    with pytest.raises(openai.BadRequestError) as chat_err:
        client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "hi"}], max_tokens=4
        )
    body = chat_err.value.body
    assert isinstance(body, dict) and body["param"] == "model" and "images" in body["message"]


def test_a_client_that_leaves_mid_generation_ends_aborted_at_once(cluster: Cluster) -> None:
    keys = cluster.tenants(["acme"])
    cluster.start_worker(profile=PROFILE, speed=0.5)  # ~9.4 s per image
    cluster.start_scheduler()
    gw = cluster.start_gateway()
    client = openai.OpenAI(base_url=f"{gw}/v1", api_key=keys["acme"], max_retries=0, timeout=1.5)
    left = time.monotonic()
    with pytest.raises(openai.APITimeoutError):
        client.images.generate(model=MODEL, prompt="a slow cathedral")
    (row,) = _rows(cluster, 1, timeout_s=8.0)
    assert row.status == "aborted" and row.images is None
    assert time.monotonic() - left < 8.0  # not when the image would have been done
