"""The Workflows page in Chromium: after QA workflows ran live under kairos, the learned
graph shows Router → Math and Router → Humanities at the frequencies sent (each within 5
points of the scenario's 0.5), the priority order the scheduler uses, and the history tab
agrees. Screenshots: 07-workflows-learned, 08-workflows-history."""

from __future__ import annotations

from typing import Any

import httpx

from tests.browser.chromium import ConsolePage
from tests.browser.deployment import UpInfo
from tests.browser.streamlit_dom import (
    choose,
    dataframe,
    grid_rows,
    no_exception,
    open_page,
    wait_until,
)
from tests.browser.workflow_traffic import APP, EXPERTS, QaWorkflows

BRANCH_P = 0.5
"""scenarios/kairos-qa.yaml: the router hands a question to math or humanities, 0.5 each."""
TOLERANCE_POINTS = 5.0
POLICY = "kairos"


def learned_app(info: UpInfo, workflows: int) -> dict[str, Any] | None:
    """The leader's learned QA application once it holds `workflows` workflows under
    `POLICY`, else None."""
    resp = httpx.get(
        f"{info.gateway_url}/admin/learned/workflows",
        params={"app": APP},
        headers={"Authorization": f"Bearer {info.admin_token}"},
        timeout=10.0,
    )
    if resp.status_code != 200 or resp.json()["policy"] != POLICY:
        return None
    apps: list[dict[str, Any]] = resp.json()["data"]
    return apps[0] if apps and apps[0]["workflows"] >= workflows else None


def recorded_calls(info: UpInfo) -> int:
    """QA calls in the request history (the recorder writes rows asynchronously)."""
    resp = httpx.get(
        f"{info.gateway_url}/admin/workflows",
        headers={"Authorization": f"Bearer {info.admin_token}"},
        timeout=10.0,
    )
    resp.raise_for_status()
    return sum(a["calls"] for a in resp.json()["data"] if a["app"] == APP)


def _frequencies(page: Any, column: str, source: str, target: str) -> dict[str, float] | None:
    rows = grid_rows(dataframe(page, column))
    found = {
        r[target]: float(r["frequency %"])
        for r in rows
        if r.get(source) == "router" and r.get(target) in EXPERTS
    }
    return found if set(found) == set(EXPERTS) else None


def _texts(locator: Any) -> set[str]:
    """Text contents (SVG has no innerText), whitespace runs as one space (plotly writes
    no-break spaces)."""
    return {" ".join(t.split()) for t in locator.all_text_contents()}


def _priorities(page: Any) -> dict[str, int] | None:
    rows = grid_rows(dataframe(page, "priority"))
    if len(rows) != 1 + len(EXPERTS) or not all(r.get("priority") for r in rows):
        return None
    return {r["agent"]: int(r["priority"]) for r in rows}


def _check(shown: dict[str, float], qa: QaWorkflows) -> None:
    for expert in EXPERTS:
        sent = 100 * qa.sent_frequency(expert)
        assert abs(shown[expert] - 100 * BRANCH_P) <= TOLERANCE_POINTS, (expert, shown)
        assert abs(shown[expert] - sent) <= 0.05 + 1e-9, (expert, shown, sent)  # 1 decimal


def see_learned_workflows(console: ConsolePage, info: UpInfo, qa: QaWorkflows) -> None:
    n = len(qa.plan)
    learned = wait_until(lambda: learned_app(info, n), f"the leader to learn {n} workflows", 60)
    assert learned["workflows"] == n, learned
    wait_until(lambda: recorded_calls(info) == 2 * n, f"{2 * n} QA calls in the history")
    page = console.page
    open_page(page, "Workflows")
    choose(page, "Application", f"acme/{APP}")
    page.get_by_text(f"Policy the leader runs: {POLICY}").wait_for()
    shown = wait_until(
        lambda: _frequencies(page, "from", "from", "to"), "the learned Router → expert edges"
    )
    _check(shown, qa)
    labels = page.locator("[data-testid='stPlotlyChart'] text.annotation-text")
    want = {f"{100 * qa.sent_frequency(e):.0f} %" for e in EXPERTS}
    wait_until(lambda: want <= _texts(labels), f"edge labels {want} on the graph")
    # kairos rescores at most every 5 s: an agent first seen since is not ranked yet
    order = wait_until(lambda: _priorities(page), "kairos's priority for every QA agent")
    # positions among every agent kairos ranks (the chat traffic's agents too), all distinct
    assert set(order) == {"router", *EXPERTS} and len(set(order.values())) == 3, order
    no_exception(page)
    console.shot("07-workflows-learned")
    page.get_by_role("tab", name="From history").click()
    history = wait_until(
        lambda: _frequencies(page, "source", "source", "target"),
        "the history's Router → expert edges",
    )
    _check(history, qa)
    no_exception(page)
    console.shot("08-workflows-history")
