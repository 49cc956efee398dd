"""Knob changes applied to the leader's core: switched, replaced, set — or ignored when bad."""

from __future__ import annotations

from typing import Any

from control_plane.admission.capacity import CapacityAdmission
from control_plane.contracts.knobs import Fairness, NodeWeights, PluginChoice
from control_plane.core.ledger import Ledger
from control_plane.core.scheduler_core import SchedulerCore
from control_plane.placement.least_loaded import LeastLoadedPlacement
from control_plane.policies.fcfs import FcfsPolicy
from control_plane.scheduler.knob_changes import apply_knob
from control_plane.scheduler.rebuild import build_core

HERE = __name__


class RaisingPolicy(FcfsPolicy):
    """A plug-in whose own code raises when built (not a ValueError: anything a third
    party's constructor may raise)."""

    def __init__(self, *args: Any) -> None:
        raise RuntimeError("this plug-in cannot start here")


class RaisingAdmission(CapacityAdmission):
    def __init__(self, *args: Any) -> None:
        raise RuntimeError("this plug-in cannot start here")


class RaisingPlacement(LeastLoadedPlacement):
    def __init__(self, *args: Any) -> None:
        raise KeyError("this plug-in cannot start here")


def core() -> SchedulerCore:
    return build_core({"policy": PluginChoice("fcfs")}, Ledger(), "fcfs")


def test_a_plug_in_whose_code_raises_leaves_the_core_as_it_was() -> None:
    """Only `ValueError`s (invalid choices) were caught: a plug-in whose constructor raised
    anything else ended the knob loop, and so the leader's term, at every takeover."""
    c = core()
    apply_knob(c, "policy", PluginChoice(f"{HERE}:RaisingPolicy"), 1.0)
    apply_knob(c, "admission", PluginChoice(f"{HERE}:RaisingAdmission"), 1.0)
    apply_knob(c, "placement", PluginChoice(f"{HERE}:RaisingPlacement"), 1.0)
    raising = f"{HERE}:RaisingPolicy"
    apply_knob(
        c, "policy", PluginChoice("auto", {"pool": ["fcfs", raising], "initial": raising}), 1.0
    )
    assert c.dispatcher.policy.name == "fcfs" and c.controller is None
    assert (c.dispatcher.admission.name, c.dispatcher.placement.name) == (
        "capacity",
        "least_loaded",
    )
    assert set(c.knob_errors) == {"policy", "admission", "placement"}  # for the live view
    assert "RuntimeError: this plug-in cannot start here" in c.knob_errors["admission"]
    assert c.knob_errors["policy"].startswith("'auto' cannot be built")
    apply_knob(c, "policy", PluginChoice("vtc"), 2.0)
    apply_knob(c, "placement", PluginChoice("round_robin"), 2.0)
    assert set(c.knob_errors) == {"admission"}  # a value applied clears its knob's


def test_a_pinned_policy_is_switched_and_a_bad_one_leaves_the_core_as_it_was() -> None:
    c = core()
    apply_knob(c, "policy", PluginChoice("vtc"), 1.0)
    assert c.dispatcher.policy.name == "vtc"
    apply_knob(c, "policy", PluginChoice("no-such-policy"), 2.0)
    apply_knob(c, "policy", PluginChoice("vtc", {"no_such_param": 1}), 3.0)
    assert c.dispatcher.policy.name == "vtc"


def test_admission_and_placement_are_replaced_and_weights_set() -> None:
    c = core()
    policy = c.dispatcher.policy
    apply_knob(c, "placement", PluginChoice("round_robin"), 1.0)
    apply_knob(c, "admission", PluginChoice("capacity", {"token_fence": 0.5}), 1.0)
    apply_knob(c, "placement", PluginChoice("no-such-placement"), 1.0)
    assert c.dispatcher.placement.name == "round_robin"
    assert c.dispatcher.admission.name == "capacity"
    assert c.dispatcher.policy is policy  # the queue is untouched
    apply_knob(c, "weights", NodeWeights({("acme",): 3.0}), 1.0)
    assert c.ctx.weights.of(("acme",)) == 3.0


def test_a_node_the_weights_knob_no_longer_names_is_back_to_weight_1() -> None:
    """A deleted node's entry leaves the knob; the leader used to keep its old weight until a
    takeover (a re-created tenant of that name ran at the old one until its first request),
    while a new leader building from the same knob had 1. Weights only requests' envelopes
    set are not the knob's to drop."""
    c = core()
    apply_knob(c, "weights", NodeWeights({("acme",): 5.0, ("beta",): 2.0}), 1.0)
    c.ctx.weights.set(("gamma",), 4.0)  # as an arrival's envelope sets it
    apply_knob(c, "weights", NodeWeights({("beta",): 2.0}), 2.0)
    rebuilt = build_core(
        {"policy": PluginChoice("fcfs"), "weights": NodeWeights({("beta",): 2.0})},
        Ledger(),
        "fcfs",
    )
    assert rebuilt.ctx.weights.table == {("beta",): 2.0}
    assert c.ctx.weights.table == {("beta",): 2.0, ("gamma",): 4.0}
    apply_knob(c, "weights", NodeWeights({("beta",): 2.0}), 3.0)  # a catch-up re-read
    assert c.ctx.weights.of(("gamma",)) == 4.0 and c.ctx.weights.of(("acme",)) == 1.0


def test_under_auto_the_fairness_knob_reaches_the_policies_the_controller_builds() -> None:
    """The meta-controller built each policy with its own α and β, whatever the `fairness`
    knob said (only a pinned policy got them, carried into its params by the admin API)."""
    c = core()
    apply_knob(c, "fairness", Fairness(0.9, 0.25), 1.0)
    auto = {"pool": ["fcfs", "exfairs"], "initial": "exfairs"}
    apply_knob(c, "policy", PluginChoice("auto", auto), 1.0)
    params = c.dispatcher.policy.params.model_dump()
    assert c.dispatcher.policy.name == "exfairs"
    assert (params["alpha"], params["beta"]) == (0.9, 0.25)
    apply_knob(c, "fairness", Fairness(0.5, 0.25), 2.0)  # the running one is built again
    assert c.dispatcher.policy.params.model_dump()["alpha"] == 0.5
    assert c.controller is not None and c.controller.build("fcfs").name == "fcfs"  # takes none
    rebuilt = build_core(
        {"policy": PluginChoice("auto", auto), "fairness": Fairness(0.4, None)}, Ledger(), "fcfs"
    )  # a takeover
    assert rebuilt.dispatcher.policy.params.model_dump()["alpha"] == 0.4
    apply_knob(rebuilt, "fairness", Fairness(0.3, None), 3.0)
    assert rebuilt.dispatcher.policy.params.model_dump()["alpha"] == 0.3
