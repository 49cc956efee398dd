"""The `llm` selector: a question each period, a strict answer taken late, rules otherwise."""

from __future__ import annotations

import json
import re

import pytest

from control_plane.control.llm_selector import (
    LlmParams,
    LlmSelector,
    parse_answer,
    request_body,
)
from control_plane.control.meta import AutoParams, build_controller
from control_plane.control.views import LongView
from tests.control_plane.control.test_meta import core_with, unset

POOL = ("fcfs", "sjf", "wfq", "edf")


def view(t: float, growth: float = 1.0, violations: float = 0.5) -> LongView:
    """A view whose rules answer is `sjf` (the queue grows; one tenant; few SLOs)."""
    return LongView(
        t=t, span_s=30.0, arrival_rps=5.0, completion_rps=4.0, goodput_rps=2.0,
        prompt_mean=500.0, prompt_cv=0.5, out_mean=100.0, out_cv=0.5, t_tot_cv=0.3,
        long_fraction=0.0, tenants=1, jain_service=1.0, slo_share=0.1,
        violation_rate=violations, ttft_miss_rate=0.1, tpot_miss_rate=0.1, ttft_p99_s=2.0,
        queued=10, queue_growth_rps=growth,
    )  # fmt: skip


def selector(timeout_s: float = 10.0) -> LlmSelector:
    return LlmSelector(LlmParams(model="m", timeout_s=timeout_s))


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("sjf", "not JSON"),
        ('{"policy": "sjf"}', "exactly"),
        ('{"policy": "sjf", "reason": "x", "confidence": 1}', "exactly"),
        ('["sjf", "x"]', "exactly"),
        ('{"policy": "lifo", "reason": "x"}', "not in the pool"),
        ('{"policy": 3, "reason": "x"}', "not in the pool"),
        ('{"policy": "sjf", "reason": ' + json.dumps("x" * 201) + "}", "at most 200"),
    ],
)
def test_only_one_strict_object_naming_a_pool_policy_is_an_answer(text: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        parse_answer(text, POOL)
    assert parse_answer('{"reason": " queue grows ", "policy": "sjf"}', POOL) == (
        "sjf",
        "queue grows",
    )


def test_choose_keeps_the_policy_and_asks_once_then_the_answer_is_taken_late() -> None:
    s = selector()
    choice = s.choose(view(100.0), "fcfs", POOL)
    assert choice.policy == "fcfs" and s.late(100.5) is None
    q = s.take_question()
    assert q is not None and s.take_question() is None and q.pool == POOL
    assert "Current policy: fcfs" in q.messages[1]["content"]
    assert all(p in q.messages[0]["content"] for p in POOL)
    s.answer(q.id, '{"policy": "wfq", "reason": "protect light tenants"}', 101.0)
    late = s.late(101.0)
    assert late is not None and late.policy == "wfq" and late.reason.startswith("llm: protect")
    assert s.late(200.0) is None  # resolved once
    assert s.stats == {"asked": 1, "answered": 1, "invalid": 0, "timeout": 0}


def test_an_invalid_or_failed_answer_falls_back_to_the_rules_at_once() -> None:
    s = selector()
    s.choose(view(0.0), "fcfs", POOL)
    q = s.take_question()
    assert q is not None
    s.answer(q.id, "I would pick SJF.", 1.0)
    late = s.late(1.0)
    assert late is not None and late.policy == "sjf"
    assert late.reason.startswith("llm invalid (not JSON") and "rules: overload" in late.reason
    s.choose(view(30.0), "sjf", POOL)
    q2 = s.take_question()
    assert q2 is not None
    s.answer(q2.id, None, 31.0)
    assert s.stats["invalid"] == 2 and s.last_error == "no reply"


def test_no_answer_in_time_means_the_rules_and_a_late_or_stale_answer_is_ignored() -> None:
    s = selector(timeout_s=5.0)
    s.choose(view(0.0), "fcfs", POOL)
    q = s.take_question()
    assert q is not None
    assert s.late(4.9) is None
    late = s.late(5.0)
    assert late is not None and late.reason.startswith("llm timeout; rules")
    s.answer(q.id, '{"policy": "wfq", "reason": "late"}', 6.0)
    assert s.late(6.0) is None and s.stats["timeout"] == 1 and s.stats["answered"] == 0
    s.choose(view(30.0), "sjf", POOL)
    s.answer(q.id, '{"policy": "wfq", "reason": "old question"}', 31.0)
    assert s.late(31.0) is None


def test_request_bodies_constrain_the_reply_as_configured() -> None:
    s = selector()
    s.choose(view(0.0), "fcfs", POOL)
    q = s.take_question()
    assert q is not None
    body = request_body(LlmParams(model="m"), q)
    schema = body["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["policy"]["enum"] == list(POOL) and body["temperature"] == 0.0
    regex = request_body(LlmParams(model="m", constrain="vllm_regex"), q)
    pattern = regex["structured_outputs"]["regex"]
    assert re.fullmatch(pattern, '{"policy": "wfq", "reason": "fair share"}')
    assert not re.fullmatch(pattern, '{"policy": "lifo", "reason": "x"}')
    assert "response_format" not in request_body(LlmParams(model="m", constrain="none"), q)


def test_the_controller_switches_on_the_late_answer_and_records_it() -> None:
    llm = {"model": "m", "timeout_s": 5.0}
    ctl = build_controller({"selector": "llm", "llm": llm, "period_s": 10.0}, unset)
    core = core_with(ctl)
    core.tick(0.0)
    core.tick(10.0)  # the period ends: a question, no switch yet
    assert core.dispatcher.policy.name == "fcfs" and not ctl.switches
    s = ctl.selector
    assert isinstance(s, LlmSelector)
    q = s.take_question()
    assert q is not None
    s.answer(q.id, '{"policy": "edf", "reason": "deadlines"}', 11.0)
    core.tick(11.0)
    assert core.dispatcher.policy.name == "edf"
    assert ctl.switches[-1].reason == "llm: deadlines" and ctl.switches[-1].selector == "llm"


def test_the_llm_selector_needs_its_model_and_a_timeout_inside_the_period() -> None:
    with pytest.raises(ValueError, match=r"llm\.model"):
        AutoParams.model_validate({"selector": "llm"})
    with pytest.raises(ValueError, match=r"llm\.timeout_s"):
        AutoParams.model_validate(
            {"selector": "llm", "llm": {"model": "m", "timeout_s": 30}, "period_s": 30}
        )
    with pytest.raises(ValueError):
        AutoParams.model_validate({"selector": "llm", "llm": {"model": ""}})


def test_the_fallback_rules_calm_count_survives_a_checkpoint() -> None:
    s = selector()
    s.fallback.home = "fcfs"
    s.choose(view(0.0, growth=-1.0, violations=0.0), "sjf", POOL)  # one calm period
    again = selector()
    again.fallback.home = "fcfs"
    again.restore(s.snapshot())
    again.choose(view(30.0, growth=-1.0, violations=0.0), "sjf", POOL)
    assert again.take_question() is not None
    assert again._rules is not None and again._rules.reason == "calm: back to fcfs"
