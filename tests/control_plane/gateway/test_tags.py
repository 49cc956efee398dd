"""Request tags: headers win over metadata; bounded values only; tags only relax records."""

from __future__ import annotations

import pytest

from control_plane.gateway.errors import ApiError
from control_plane.gateway.tags import clamp_tier, read_tags, relax, strip_tags


def test_headers_win_over_metadata() -> None:
    tags = read_tags(
        {"x-arbiter-app": "hdr"},
        {"app": "meta", "X-Arbiter-Agent": "a1", "slo_ttft_ms": 250, "user_key": 1},
    )
    assert (tags.app, tags.agent, tags.slo_ttft_ms) == ("hdr", "a1", 250.0)


@pytest.mark.parametrize(
    "header,value",
    [
        ("x-arbiter-slo-ttft-ms", "0"),
        ("x-arbiter-slo-e2e-ms", "abc"),
        ("x-arbiter-priority", "high"),
        ("x-arbiter-app", "bad name!"),
        # bounds: each of these was accepted before (and 2**63 crashed the recorder later)
        ("x-arbiter-priority", "9223372036854775808"),
        ("x-arbiter-priority", "99999999999999999999999999"),
        ("x-arbiter-priority", "1001"),
        ("x-arbiter-priority", "-1"),
        ("x-arbiter-priority", " 5"),
        ("x-arbiter-priority", "1_0"),
        ("x-arbiter-slo-ttft-ms", "inf"),
        ("x-arbiter-slo-ttft-ms", "nan"),
        ("x-arbiter-slo-ttft-ms", "1e999"),
        ("x-arbiter-slo-tpot-ms", "86400001"),
        ("x-arbiter-app", "evil\n"),
        ("x-arbiter-agent", "a" * 129),
    ],
)
def test_invalid_tags_are_400_naming_the_tag(header: str, value: str) -> None:
    with pytest.raises(ApiError) as err:
        read_tags({header: value}, None)
    assert err.value.status == 400
    assert err.value.param is not None and err.value.param.lower() == header


@pytest.mark.parametrize(
    "key,value",
    [
        ("priority", 1e30),
        ("priority", 10**30),
        ("priority", 2.5),
        ("priority", True),
        ("app", "evil\n"),
        ("app", 5),
        ("slo_ttft_ms", float("inf")),
        ("slo_ttft_ms", float("nan")),
        ("slo_e2e_ms", 10**400),
    ],
)
def test_invalid_metadata_tags_are_400_naming_the_key(key: str, value: object) -> None:
    with pytest.raises(ApiError) as err:
        read_tags({}, {key: value})
    assert err.value.status == 400
    assert err.value.param == f"metadata.{key}"
    assert err.value.body()["error"]["param"] == f"metadata.{key}"


def test_valid_bounded_values_pass() -> None:
    tags = read_tags(
        {"x-arbiter-priority": "1000", "x-arbiter-slo-e2e-ms": "1.5e-05"},
        {"priority": 3, "slo_tpot_ms": "12.5", "workflow": "wf-1:a.b"},
    )
    assert (tags.priority, tags.slo_e2e_ms, tags.slo_tpot_ms) == (1000, 1.5e-05, 12.5)
    assert tags.workflow == "wf-1:a.b"
    assert read_tags({}, {"priority": 7}).priority == 7


def test_priority_comes_only_from_records() -> None:
    assert clamp_tier(3, 0) == 3
    assert clamp_tier(3, 7) == 7
    assert clamp_tier(3, None) == 3
    # an SLO header relaxes the record's target, never tightens it
    assert relax(500.0, 900.0) == 900.0
    assert relax(500.0, 100.0) == 500.0
    assert relax(500.0, 1e-300) == 500.0
    assert relax(500.0, None) == 500.0
    # and cannot add a target (more urgent than none) where the records set none
    assert relax(None, 100.0) is None
    assert relax(None, None) is None


def test_strip_tags_keeps_foreign_metadata() -> None:
    assert strip_tags({"app": "x", "trace": "t"}) == {"trace": "t"}
