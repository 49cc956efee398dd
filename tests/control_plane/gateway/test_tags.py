"""Request tags: headers win over metadata; tags only narrow what records allow."""

from __future__ import annotations

import pytest

from control_plane.api.errors import ApiError
from control_plane.gateway.tags import clamp_tier, read_tags, strip_tags, tighten


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
    ],
)
def test_invalid_tags_are_400_naming_the_tag(header: str, value: str) -> None:
    with pytest.raises(ApiError) as err:
        read_tags({header: value}, None)
    assert err.value.status == 400
    assert err.value.param is not None and err.value.param.lower() == header


def test_priority_only_less_urgent_and_slo_only_tighter() -> None:
    assert clamp_tier(3, 0) == 3
    assert clamp_tier(3, 7) == 7
    assert clamp_tier(3, None) == 3
    assert tighten(500.0, 900.0) == 500.0
    assert tighten(500.0, 100.0) == 100.0
    assert tighten(None, 100.0) == 100.0


def test_strip_tags_keeps_foreign_metadata() -> None:
    assert strip_tags({"app": "x", "trace": "t"}) == {"trace": "t"}
    assert strip_tags({"X-Arbiter-App": "x"}) is None
