"""No oracle in the simulator: the scheduler sees the client's cap and history, the engine alone
the true length; what the scheduler learns from history is what makes length-aware policies
work."""

from __future__ import annotations

from statistics import mean
from typing import Any

from control_plane.core.job import Job
from control_plane.sim.engine_loop import Simulator
from control_plane.sim.scenario import load_scenario
from control_plane.sim.setup import PolicySpec, build_setup
from control_plane.sim.workload import DEFAULT_MAX_TOKENS, build_workload
from tests.control_plane.sim.builders import run, tiny


def two_agents(**overrides: Any) -> dict[str, Any]:
    """One tenant whose `short` and `long` agents send alike prompts, overloading one worker."""
    fixed = {"dist": "fixed"}
    agents = [{"name": "short"}, {"name": "long"}]
    data: dict[str, Any] = {
        "duration_s": 60,
        "drain_s": 600,
        "cluster": [{"profile": "llama3-8b-a100", "max_num_seqs": 4}],
        "tenants": [{"name": "a", "apps": [{"name": "app", "agents": agents}]}],
        "classes": {
            name: {"prompt": fixed | {"value": 200}, "output": fixed | {"value": n}}
            for name, n in (("short", 20), ("long", 600))
        },
        "workload": [
            {"tenant": "a", "app": "app", "agent": agent, "class": agent,
             "arrival": {"process": "poisson", "rate": 2.0}}
            for agent in ("short", "long")
        ],
        "scheduler": {"queue_timeout_s": None},
    }  # fmt: skip
    data.update(overrides)
    return data


def test_jobs_carry_the_cap_and_the_engine_the_true_length() -> None:
    scenario = tiny(**two_agents(duration_s=30))
    specs = build_workload(scenario)
    assert {s.cap for s in specs} == {DEFAULT_MAX_TOKENS} and {s.n_out for s in specs} == {20, 600}
    setup = build_setup(scenario, PolicySpec("fcfs", "fcfs"))
    sim = Simulator(setup, specs)
    seen: list[Job] = []
    arrive = sim.core.arrive

    def spy(job: Job, weights: dict[str, float] | None, now: float) -> None:
        seen.append(job)
        arrive(job, weights, now)

    sim.core.arrive = spy  # type: ignore[method-assign]
    records = sim.run()
    assert len(seen) == len(specs)
    assert all(j.max_tokens == DEFAULT_MAX_TOKENS for j in seen)
    assert seen[0].predicted_out == DEFAULT_MAX_TOKENS  # cold start: nothing learnt yet
    by_agent = {j.agent: j.predicted_out for j in seen[-10:]}
    # learnt from the answers that ended (still shrunk toward the app's while they are few)
    assert by_agent["short"] < by_agent["long"] < DEFAULT_MAX_TOKENS
    assert {r.n_out for r in records if r.status == "ok"} == {20, 600}
    assert all(r.max_tokens == DEFAULT_MAX_TOKENS for r in records)
    assert setup.dispatcher.lengths.error.n > 0


def test_a_cap_below_the_answer_truncates_it() -> None:
    data = two_agents(duration_s=5)
    data["classes"]["long"]["max_tokens"] = {"dist": "fixed", "value": 100}
    specs = build_workload(tiny(**data))
    long = [s for s in specs if s.agent == "long"]
    assert long and all(s.cap == 100 and s.n_out == 100 for s in long)


def test_sjf_learns_which_agent_is_short_without_seeing_lengths() -> None:
    scenario = tiny(**two_agents())

    def waits(policy: str) -> dict[str, float]:
        records = run(scenario, policy).records
        return {
            agent: mean(r.queue_s or 0.0 for r in records if r.agent == agent and r.arrival > 30)
            for agent in ("short", "long")  # arrivals after the first answers taught SJF
        }

    fcfs, sjf = waits("fcfs"), waits("sjf")
    assert sjf["short"] < 0.25 * fcfs["short"]
    assert sjf["short"] < 0.25 * sjf["long"]


def test_an_image_request_s_cap_is_its_steps_as_the_gateway_queues_it() -> None:
    # An image's output (n · steps) is what its client asks for, not a prediction: the gateway
    # queues it as exactly that, so the simulated scheduler sees the same, not 2048.
    scenario = load_scenario("hmfs-multimodal").with_overrides(None, 30)
    specs = build_workload(scenario)
    images = [s for s in specs if s.model == "sd3-medium"]
    assert images and all(s.cap == s.n_out == 28 for s in images)
    assert all(s.cap == DEFAULT_MAX_TOKENS for s in specs if s.model != "sd3-medium")
    assert scenario.image_models() == {"sd3-medium"}
