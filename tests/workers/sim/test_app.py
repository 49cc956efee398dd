"""The simulated worker's HTTP surface in-process (``httpx.ASGITransport``): answers and errors."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson
import pytest

from workers.sim.app import SimApp, create_app
from workers.sim.config import SimConfig
from workers.sim.tokens import count_tokens


@pytest.fixture
def app() -> SimApp:
    return create_app(SimConfig(speed=1000, max_model_len=64, served_model_name="m"))


@pytest.fixture
async def client(app: SimApp) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://sim") as c:
        yield c


async def post(client: httpx.AsyncClient, path: str, body: Any, **kw: Any) -> httpx.Response:
    return await client.post(path, json=body, **kw)


def error(resp: httpx.Response, status: int) -> dict[str, Any]:
    assert resp.status_code == status, resp.text
    err = resp.json()["error"]
    assert set(err) == {"message", "type", "param", "code"} and err["code"] == status
    return dict(err)


async def test_models_and_tokenize(client: httpx.AsyncClient) -> None:
    card = (await client.get("/v1/models")).json()["data"][0]
    assert (card["id"], card["max_model_len"]) == ("m", 64)
    tok = (await post(client, "/tokenize", {"prompt": "a b, c"})).json()
    assert tok == {"count": 5, "max_model_len": 64, "tokens": tok["tokens"], "token_strs": None}
    strs = (await post(client, "/tokenize", {"prompt": "a b", "return_token_strs": True})).json()
    assert strs["token_strs"] == ["<s>", "a", "b"]
    chat = await post(client, "/tokenize", {"messages": [{"role": "user", "content": "x"}]})
    assert chat.json()["count"] == count_tokens("<|user|>\nx\n<|assistant|>\n")
    assert (await client.get("/health")).status_code == 200


async def test_answers_carry_request_id_and_usage(client: httpx.AsyncClient) -> None:
    body = {"model": "m", "prompt": "one two", "max_tokens": 3, "ignore_eos": True}
    resp = await post(client, "/v1/completions", body, headers={"X-Request-Id": "abc"})
    data = resp.json()
    assert data["id"] == "cmpl-abc"
    assert data["choices"][0]["text"] == " lorem ipsum dolor"
    assert data["usage"]["prompt_tokens"] == 3 and data["usage"]["completion_tokens"] == 3


async def test_stream_body_is_vllm_sse(client: httpx.AsyncClient) -> None:
    body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, "stream": True}
    resp = await post(client, "/v1/chat/completions", {**body, "ignore_eos": True})
    assert resp.headers["content-type"] == "text/event-stream; charset=utf-8"
    events = resp.text.split("\n\n")
    assert events[-2:] == ["data: [DONE]", ""]
    chunks = [orjson.loads(e[6:]) for e in events[:-2]]
    assert [c["choices"][0]["delta"] for c in chunks] == [
        {"role": "assistant", "content": ""},
        {"content": " lorem"},
        {"content": " ipsum"},
    ]
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"


async def test_one_chunk_per_token(client: httpx.AsyncClient) -> None:
    body = {"prompt": "x", "max_tokens": 40, "ignore_eos": True, "stream": True}
    resp = await post(
        client, "/v1/completions", {**body, "stream_options": {"include_usage": True}}
    )
    chunks = [orjson.loads(e[6:]) for e in resp.text.split("\n\n")[:-2]]
    assert len(chunks) == 41 and chunks[-1]["usage"]["completion_tokens"] == 40
    assert all(count_tokens(c["choices"][0]["text"], bos=False) == 1 for c in chunks[:-1])


async def test_room_left_in_context_lowers_max_tokens(client: httpx.AsyncClient) -> None:
    # vLLM 0.32 does not refuse prompt + max_tokens > max_model_len: it lowers max_tokens.
    body = {"prompt": "w " * 10, "max_tokens": 60, "ignore_eos": True}
    data = (await post(client, "/v1/completions", body)).json()
    assert data["usage"]["completion_tokens"] == 64 - 11
    assert data["choices"][0]["finish_reason"] == "length"


@pytest.mark.parametrize(
    ("body", "param", "needle"),
    [
        ({"prompt": "x " * 64, "max_tokens": 1}, "input_tokens", "maximum context length is 64"),
        ({"prompt": "x", "max_tokens": 65}, "max_tokens", "max_model_len=64"),
        ({"prompt": "x", "max_tokens": 0}, "max_tokens", "at least 1"),
        ({"prompt": "x", "max_tokens": 4, "min_tokens": 5}, None, "min_tokens"),
        ({"prompt": "x", "n": 3}, "n", "n=1"),
        ({"prompt": "x", "n": 2, "temperature": 0}, None, "greedy sampling"),
        ({"prompt": "x", "stream_options": {"include_usage": True}}, "stream_options", "stream"),
        ({"prompt": "x", "max_tokens": "many"}, "body.max_tokens", "valid integer"),
        ({"prompt": "x", "max_tokens": 2.5}, "body.max_tokens", "fractional"),
        ({"prompt": "x", "stream": "maybe"}, "body.stream", "valid boolean"),
        ({"prompt": "x", "stop": 3}, "body.stop", "valid string"),
        ({"prompt": {"a": 1}}, "body.prompt", "prompt must be"),
    ],
)
async def test_bad_requests_are_400(
    client: httpx.AsyncClient, body: dict[str, Any], param: str | None, needle: str
) -> None:
    err = error(await post(client, "/v1/completions", body), 400)
    assert err["param"] == param and needle in err["message"]


async def test_bad_chat_messages_are_400(client: httpx.AsyncClient) -> None:
    for messages in ([], [{"content": "no role"}], "text"):
        resp = await post(client, "/v1/chat/completions", {"messages": messages})
        assert error(resp, 400)["param"] == "body.messages"


async def test_unknown_model_and_bodies(client: httpx.AsyncClient) -> None:
    err = error(await post(client, "/v1/chat/completions", {"model": "x", "messages": []}), 404)
    assert err == {
        "message": "The model `x` does not exist. Valid aliases: m.",
        "type": "NotFoundError",
        "param": "model",
        "code": 404,
    }
    bad = await client.post(
        "/v1/completions", content=b"{nope", headers={"content-type": "application/json"}
    )
    assert "json_invalid" in error(bad, 400)["message"]
    plain = await client.post(
        "/v1/completions", content=b"{}", headers={"content-type": "text/plain"}
    )
    assert "Unsupported Media Type" in error(plain, 400)["message"]
    assert error(await post(client, "/v1/completions", [1, 2]), 400)["param"] == "body"


async def test_routing_errors_use_fastapi_shape(client: httpx.AsyncClient) -> None:
    missing = await client.get("/v1/nothing")
    assert (missing.status_code, missing.json()) == (404, {"detail": "Not Found"})
    wrong = await client.get("/v1/completions")
    assert (wrong.status_code, wrong.json()) == (405, {"detail": "Method Not Allowed"})


async def test_request_bigger_than_the_kv_cache_is_refused() -> None:
    app = create_app(SimConfig(speed=1000, kv_tokens=32))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://s") as c:
        resp = await c.post(
            "/v1/completions", json={"prompt": "x", "max_tokens": 100, "ignore_eos": True}
        )
    assert resp.status_code == 400


async def test_chat_budget_and_stop_strings(client: httpx.AsyncClient) -> None:
    messages = [{"role": "user", "content": "hi"}]
    body = {"messages": messages, "max_completion_tokens": 3, "ignore_eos": True}
    chat = (await post(client, "/v1/chat/completions", body)).json()
    assert chat["usage"]["completion_tokens"] == 3
    assert chat["choices"][0]["message"]["content"] == " lorem ipsum dolor"
    stop = {"prompt": "x", "max_tokens": 20, "ignore_eos": True, "stop": ["dolor"]}
    data = (await post(client, "/v1/completions", stop)).json()
    choice = data["choices"][0]
    assert (choice["text"], choice["finish_reason"], choice["stop_reason"]) == (
        " lorem ipsum ",
        "stop",
        "dolor",
    )
    assert data["usage"]["completion_tokens"] == 3


async def test_priority_reaches_the_engine() -> None:
    config = SimConfig(speed=4, max_num_seqs=1, scheduling_policy="priority")
    app = create_app(config)
    finished: list[str] = []
    body = {"prompt": "x", "max_tokens": 20, "ignore_eos": True}

    async def run(c: httpx.AsyncClient, name: str, **kw: Any) -> None:
        resp = await c.post("/v1/completions", **kw)
        assert resp.status_code == 200
        finished.append(name)

    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://s") as c:
        # long enough that the others arrive while it runs, even on a loaded CI box
        first = asyncio.create_task(run(c, "first", json={**body, "max_tokens": 1000}))
        await asyncio.sleep(0.005)
        late_low = asyncio.create_task(run(c, "low", json={**body, "priority": 5}))
        await asyncio.sleep(0.005)
        urgent = asyncio.create_task(run(c, "urgent", json=body, headers={"X-Vllm-Priority": "-3"}))
        await asyncio.gather(first, late_low, urgent)
    # vLLM's priority mode: the urgent request preempts the running one; priority 5 goes last
    assert finished == ["urgent", "first", "low"]
