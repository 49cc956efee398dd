"""What `arbiter bench hmfs-multimodal` registers live: each profile's model with the
scenario's override, each worker with its engine's sizes, and the scenario's admission."""

from __future__ import annotations

from control_plane.bench.multimodal import live_admission, model_spec, worker_body
from control_plane.sim.scenario import load_scenario


def test_the_registry_record_carries_the_scenarios_override_and_rules() -> None:
    scenario = load_scenario("hmfs-multimodal")
    by_name = {scenario.profile(g).model.name: scenario.profile(g) for g in scenario.cluster}
    image = model_spec(by_name["sd3-medium"], scenario)
    assert image["kind"] == "image" and image["unified_cost_factor"] == 1152
    assert image["generation"]["steps"] == 28
    vlm = model_spec(by_name["qwen2-vl-7b"], scenario)
    assert vlm["unified_cost_factor"] is None and vlm["image_tokens"]["kind"] == "patch_merge"


def test_workers_are_registered_with_their_engine_sizes() -> None:
    # The live scheduler admits up to the registered `max_num_seqs` (256 when none is given):
    # the 8-image engine would be sent every image at once, to queue inside it in FCFS order.
    scenario = load_scenario("hmfs-multimodal")
    for group in scenario.cluster:
        profile = scenario.profile(group)
        body = worker_body(group, profile, "http://127.0.0.1:1", "w")
        assert body["max_num_seqs"] == profile.max_num_seqs
        assert body["kv_tokens"] == profile.kv_tokens
        assert body["model"] == profile.model.name
    image = next(g for g in scenario.cluster if g.profile == "sd-image-a100")
    assert worker_body(image, scenario.profile(image), "http://x:1", "w")["max_num_seqs"] == 8
    bigger = image.model_copy(update={"max_num_seqs": 4})
    assert worker_body(bigger, scenario.profile(image), "http://x:1", "w")["max_num_seqs"] == 4


def test_both_sides_run_the_scenario_s_admission_over_the_live_default() -> None:
    choice = live_admission(load_scenario("hmfs-multimodal"))
    assert choice.name == "capacity"
    assert dict(choice.params) == {"skip_waiting": False, "token_fence": 0.9}
