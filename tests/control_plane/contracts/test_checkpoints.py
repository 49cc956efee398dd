"""The leader checkpoint's wire format: what a successor decodes, and a clear error naming the
field for what it cannot."""

from __future__ import annotations

import json

import pytest

from control_plane.contracts.checkpoints import (
    NO_EVENT,
    CheckpointError,
    LeaderState,
    LiveView,
    PolicyState,
    decode_leader_state,
    decode_live_view,
)


def test_a_checkpoint_round_trips_through_json() -> None:
    state = LeaderState(
        ledger={"window_s": 60.0},
        dispatcher={"policy": {"name": "vtc"}},
        running_n_out={"r1": 7},
        controller=None,
        events_applied_to="1700000000000-3",
    )
    assert decode_leader_state(json.loads(json.dumps(state.to_json()))) == state


def test_a_checkpoint_of_the_previous_release_reflects_no_event() -> None:
    """Written before `events_applied_to` existed: every claimed event is applied again."""
    old = {"ledger": None, "dispatcher": None, "running_n_out": {"r1": 2}, "controller": None}
    assert decode_leader_state(old) == LeaderState(running_n_out={"r1": 2})
    assert decode_leader_state(old).events_applied_to == NO_EVENT


@pytest.mark.parametrize("bad", ["", "12", "a-1", "1-2-3", " 1-2", 12, [1]])
def test_an_events_position_that_is_not_a_stream_id_names_the_field(bad: object) -> None:
    with pytest.raises(CheckpointError, match="events_applied_to"):
        decode_leader_state({"events_applied_to": bad})


def test_the_live_view_carries_the_knobs_the_leader_could_not_apply() -> None:
    """A new field: a view an older leader wrote (without it) decodes to none."""
    live = LiveView(
        leader="a",
        updated_at=1.0,
        policy=PolicyState("vtc", {}, None),
        knob_errors={"placement": "'x:Y' cannot be built on the leader: ImportError: no x"},
    )
    assert decode_live_view(json.loads(json.dumps(live.to_json()))) == live
    older = {k: v for k, v in live.to_json().items() if k != "knob_errors"}
    assert decode_live_view(older).knob_errors == {}
