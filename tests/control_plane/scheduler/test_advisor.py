"""The `llm` selector's advisor over real HTTP: a real vLLM (the tiny random-weight model)
answers under vLLM's structured-output regex, and every failure — a reply that is not the
strict JSON object, a worker that does not answer, no worker serving the model — falls back to
the rules' choice."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from control_plane.contracts.knobs import PluginChoice
from control_plane.contracts.workers import WorkerEntry, WorkerSample
from control_plane.control.llm_selector import LlmSelector
from control_plane.control.meta import build_controller
from control_plane.core.job import Job
from control_plane.core.ledger import Ledger
from control_plane.core.scheduler_core import SchedulerCore
from control_plane.policies.registry import build_policy
from control_plane.scheduler.advisor import Advisor
from control_plane.scheduler.rebuild import build_core
from control_plane.scheduler.workers import observe, sync_workers
from tests.support.ports import free_port
from tests.support.vllm_server import running_vllm

POOL = ["fcfs", "sjf", "wfq"]


@pytest.fixture(scope="module")
def vllm() -> Iterator[tuple[str, str]]:
    with running_vllm() as server:
        yield server


def core_with_llm(llm: dict[str, Any], worker_url: str, model: str) -> SchedulerCore:
    core = build_core({"policy": PluginChoice("fcfs")}, Ledger(), "fcfs")
    sync_workers(core, [WorkerEntry(id="w0", url=worker_url, model=model, max_num_seqs=2)])
    observe(core, "w0", WorkerSample(True, 0.0, models={model: 100_000}))
    params = {"selector": "llm", "llm": {"timeout_s": 5.0} | llm, "pool": POOL, "period_s": 30.0}
    controller = build_controller(params, lambda n: build_policy(n, core.ctx))
    controller.attach(core)
    core.controller = controller
    return core


def overload(core: SchedulerCore, t0: float) -> None:
    """Twenty arrivals nobody serves: the queue grows, so the rules answer sjf."""
    for k in range(20):
        job = Job(id=f"j{k}", tenant="t", arrival=t0, n_in=10, max_tokens=8, model="x", seq=k)
        core.arrive(job, None, t0 + k * 0.4)


async def asked(core: SchedulerCore, timeout_s: float = 60.0) -> LlmSelector:
    """Run one period (ending now, on the wall clock the advisor answers on), let the advisor
    ask, and wait until the selector has its answer."""
    now = time.time()
    core.tick(now - 30.0)
    overload(core, now - 30.0)
    core.tick(now)
    advisor = Advisor(httpx.AsyncClient())
    advisor.poll(core)
    assert core.controller is not None
    selector = core.controller.selector  # type: ignore[attr-defined]
    assert isinstance(selector, LlmSelector)
    deadline = asyncio.get_running_loop().time() + timeout_s
    while sum(selector.stats[k] for k in ("answered", "invalid")) == 0:
        assert asyncio.get_running_loop().time() < deadline, "no answer"
        await asyncio.sleep(0.05)
    await advisor.close()
    await advisor.http.aclose()
    return selector


@pytest.mark.vllm
async def test_a_real_model_constrained_by_regex_chooses_a_pool_policy(
    vllm: tuple[str, str],
) -> None:
    url, model = vllm
    core = core_with_llm({"model": model, "constrain": "vllm_regex"}, url, model)
    selector = await asked(core)
    assert selector.stats["answered"] == 1, selector.last_error
    choice = selector.late(time.time())
    assert choice is not None and choice.reason.startswith("llm: ")  # the model's own choice
    assert selector.stats["invalid"] == selector.stats["timeout"] == 0


async def test_a_malformed_url_still_gets_the_question_answered() -> None:
    core = core_with_llm({"model": "m", "url": "http://[not-a-host"}, "http://127.0.0.1:1", "m")
    selector = await asked(core)
    assert selector.stats["invalid"] == 1


@pytest.mark.vllm
async def test_an_unconstrained_random_model_is_not_believed(vllm: tuple[str, str]) -> None:
    url, model = vllm
    core = core_with_llm({"model": model, "constrain": "none", "max_tokens": 24}, url, model)
    selector = await asked(core)
    assert selector.stats["invalid"] == 1 and selector.last_error
    core.tick(time.time())
    assert core.dispatcher.policy.name == "sjf"  # the rules: the queue grows
    switch = core.controller.switches[-1]  # type: ignore[union-attr]
    assert switch.reason.startswith("llm invalid (") and "rules: overload" in switch.reason


async def test_a_dead_endpoint_falls_back_to_the_rules() -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    core = core_with_llm({"model": "m", "timeout_s": 5.0}, dead, "m")
    selector = await asked(core)
    assert selector.stats["invalid"] == 1 and selector.last_error == "no reply"
    core.tick(time.time())
    assert core.dispatcher.policy.name == "sjf"


async def test_no_worker_serving_the_model_falls_back_to_the_rules() -> None:
    core = core_with_llm({"model": "advisor-model"}, "http://127.0.0.1:1", "other-model")
    selector = await asked(core)
    assert selector.stats["invalid"] == 1
    core.tick(time.time())
    assert core.dispatcher.policy.name == "sjf"
