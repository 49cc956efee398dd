"""The `llm` selector (H-MAS §4.4): a configured model chooses the policy from `V_long`.

The controller does no I/O, so the choice is asked and answered in two steps: at the period's
end `choose` keeps the current policy and posts a `Question`; the scheduler's advisor
(`scheduler/advisor.py`) sends it to the model and hands the reply to `answer`; the controller
collects the result with `late` on a later cycle. A reply must be one strict JSON object
`{"policy": <a policy of the pool>, "reason": <text>}`; anything else, or no reply within
`timeout_s`, falls back to the rules selector's choice for the same view.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from control_plane.control.selectors import Choice, RulesSelector
from control_plane.control.views import LongView

POLICY_NOTES = {
    "fcfs": "first come first served (vLLM's default order)",
    "edf": "earliest SLO deadline first",
    "sjf": "shortest predicted job first: most completions per unit of capacity",
    "llf": "least laxity (slack to the deadline) first",
    "two_lane": "fast and slow lanes by predicted service time, slots reserved for the fast",
    "wfq": "weighted fair queueing over tenants (virtual token counters)",
    "vtc": "virtual token counter: the least-served tenant first",
    "hmfs": "hierarchical multi-modal fair share (tenant, app, agent)",
    "exfairs": "SLO-aware fairness with credits",
    "rr": "round-robin over clients",
}
MAX_REASON = 200
VIEW_FIELDS = (
    "arrival_rps", "completion_rps", "goodput_rps", "prompt_mean", "out_mean", "t_tot_cv",
    "long_fraction", "tenants", "jain_service", "slo_share", "violation_rate", "ttft_miss_rate",
    "tpot_miss_rate", "ttft_p99_s", "queued", "queue_growth_rps",
)  # fmt: skip


class LlmParams(BaseModel):
    """Where the `llm` selector's model is and how it is asked (the `llm` field of `auto`)."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field(min_length=1)
    """The served model name; without `url`, a healthy worker serving it is asked directly."""
    url: str | None = None
    """An OpenAI-compatible root URL (e.g. a separate advisor model); None: the pool's worker."""
    timeout_s: float = Field(10.0, gt=0)
    max_tokens: int = Field(96, ge=16, le=1024)
    constrain: Literal["json_schema", "vllm_regex", "none"] = "json_schema"
    """How the reply is constrained: OpenAI's `response_format` JSON schema, vLLM's
    `structured_outputs` regex (a compact object, no free whitespace), or not at all."""


@dataclass(frozen=True, slots=True)
class Question:
    """One request for a choice: the chat messages and what a valid answer may name."""

    id: int
    asked_at: float
    messages: list[dict[str, str]]
    pool: tuple[str, ...]
    current: str


def prompt(
    view: LongView, current: str, pool: Sequence[str], period_s: float
) -> list[dict[str, str]]:
    """The chat messages of a question: the pool with one line per policy, then the view."""
    notes = "\n".join(f"- {p}: {POLICY_NOTES.get(p, 'a policy of the pool')}" for p in pool)
    data = view.to_json()
    numbers = {
        k: round(v, 4) if isinstance(v, float) else v
        for k in VIEW_FIELDS
        if (v := data.get(k)) is not None
    }
    system = (
        "You are the meta-controller of a shared LLM serving pool. Choose the request ordering "
        f"policy for the next {period_s:g} seconds to maximise goodput (requests served within "
        "their latency SLO) without starving any tenant. Policies:\n"
        f"{notes}\n"
        'Answer with one JSON object and nothing else: {"policy": "<name>", "reason": "<at most '
        'a sentence>"}.'
    )
    user = (
        f"Current policy: {current}.\nLast {view.span_s:.0f} s of the pool: {json.dumps(numbers)}"
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def parse_answer(text: str, pool: Sequence[str]) -> tuple[str, str]:
    """`(policy, reason)` from a reply; ValueError naming what is wrong when it is not one
    JSON object with exactly `policy` (a name of `pool`) and `reason` (a short string)."""
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, TypeError) as exc:
        raise ValueError(
            f"not JSON ({exc.msg if isinstance(exc, json.JSONDecodeError) else exc})"
        ) from None
    if not isinstance(data, dict) or set(data) != {"policy", "reason"}:
        raise ValueError('not an object with exactly "policy" and "reason"')
    policy, reason = data["policy"], data["reason"]
    if not isinstance(policy, str) or policy not in pool:
        raise ValueError(f"policy {policy!r} is not in the pool")
    if not isinstance(reason, str) or len(reason) > MAX_REASON:
        raise ValueError(f"reason must be a string of at most {MAX_REASON} characters")
    return policy, reason.strip()


@dataclass
class LlmSelector:
    """Asks a model each period; its valid answer, else the rules' choice, is taken late.

    Guarantees: `choose` never switches by itself (it keeps `current` while the question is
    open); exactly one of the model's answer or the fallback resolves each question; an answer
    to an older question, or after the timeout, is ignored; `stats` counts asked, answered,
    invalid and timed-out questions."""

    params: LlmParams
    period_s: float = 30.0
    fallback: RulesSelector = field(default_factory=RulesSelector)
    name: str = "llm"
    question: Question | None = None
    """The open question, until the advisor takes it."""
    last_error: str | None = None
    stats: dict[str, int] = field(
        default_factory=lambda: {"asked": 0, "answered": 0, "invalid": 0, "timeout": 0}
    )
    _open: Question | None = None
    _deadline: float = 0.0
    _rules: Choice | None = None
    _resolved: Choice | None = None

    def choose(self, view: LongView, current: str, pool: Sequence[str]) -> Choice:
        rules = self.fallback.choose(view, current, pool)
        seq = self.stats["asked"] + 1
        self.stats["asked"] = seq
        q = Question(seq, view.t, prompt(view, current, pool, self.period_s), tuple(pool), current)
        self.question = self._open = q
        self._deadline, self._rules, self._resolved = view.t + self.params.timeout_s, rules, None
        return Choice(current, "asked llm")

    def take_question(self) -> Question | None:
        """The open question, once (the advisor sends it)."""
        q, self.question = self.question, None
        return q

    def answer(self, question_id: int, text: str | None, now: float) -> None:
        """The model's reply to question `question_id` (None: the request failed)."""
        q = self._open
        if q is None or q.id != question_id or now > self._deadline:
            return  # stale or late: the fallback has or will resolve it
        self._open = None
        try:
            if text is None:
                raise ValueError("no reply")
            policy, reason = parse_answer(text, q.pool)
        except ValueError as exc:
            self.stats["invalid"] += 1
            self.last_error = str(exc)
            self._resolved = self._fall_back(f"llm invalid ({exc})")
            return
        self.stats["answered"] += 1
        self._resolved = Choice(policy, f"llm: {reason}" if reason else "llm")

    def late(self, now: float) -> Choice | None:
        """The resolved choice of the last question, once; the fallback after the timeout."""
        if self._resolved is not None:
            choice, self._resolved = self._resolved, None
            return choice
        if self._open is not None and now >= self._deadline:
            self._open = self.question = None
            self.stats["timeout"] += 1
            return self._fall_back("llm timeout")
        return None

    def _fall_back(self, why: str) -> Choice | None:
        rules, self._rules = self._rules, None
        return None if rules is None else Choice(rules.policy, f"{why}; rules: {rules.reason}")

    def reward(self, view: LongView) -> None:
        """The model is not trained here."""

    def snapshot(self) -> Any:
        return {"stats": dict(self.stats), "rules": self.fallback.snapshot()}

    def restore(self, data: Any) -> None:
        if isinstance(data, dict):
            self.fallback.restore(data.get("rules"))
        stats = data.get("stats") if isinstance(data, dict) else None
        if isinstance(stats, dict):
            for k in self.stats:
                v = stats.get(k)
                if isinstance(v, int) and v >= 0:
                    self.stats[k] = v


def request_body(params: LlmParams, q: Question) -> dict[str, Any]:
    """The chat-completions body for question `q`, constrained as `params.constrain` says."""
    body: dict[str, Any] = {
        "model": params.model,
        "messages": q.messages,
        "max_tokens": params.max_tokens,
        "temperature": 0.0,
    }
    if params.constrain == "json_schema":
        schema = {
            "type": "object",
            "properties": {
                "policy": {"type": "string", "enum": list(q.pool)},
                "reason": {"type": "string", "maxLength": MAX_REASON},
            },
            "required": ["policy", "reason"],
            "additionalProperties": False,
        }
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": "policy_choice", "strict": True, "schema": schema},
        }
    elif params.constrain == "vllm_regex":
        names = "|".join(re.escape(p) for p in q.pool)
        reason = "[A-Za-z0-9 ,.;:()'-]{1,120}"
        body["structured_outputs"] = {
            "regex": f'\\{{"policy": "({names})", "reason": "{reason}"\\}}'
        }
    return body


def completions_url(root: str) -> str:
    """The chat-completions endpoint under an OpenAI-compatible root URL."""
    return f"{root.rstrip('/')}/v1/chat/completions"


def reply_text(data: Any) -> str | None:
    """The first choice's message text of a chat-completions response; None if it has none."""
    try:
        content = data["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        return None
    return content if isinstance(content, str) else None
