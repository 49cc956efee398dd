"""The operator console in a real browser, against a real `arbiter up` (issues 5, 10, 15).

Headless Chromium (Debian's `chromium`) is driven by Playwright — Python's `playwright`
package, the same engine and protocol as `playwright-core`, launched with
`executable_path=/usr/bin/chromium` and an empty profile (see `chromium.py`). The story: a
named operator signs in (a wrong token is refused plainly), reloads and opens a deep link
still signed in, sees both demo tenants on the Live table, reviews and confirms acme's new
weight, sees the audit row under their own name and the weight applied by the leader, picks a
range on the Live page that a reload keeps (then 15 minutes), opens Reports and downloads the
CSV, whose request counts equal what the client sent. Then the operator switches the policy
to kairos in the console (diff, confirmation, applied by the leader, audited under their
name), 200 QA workflows (router, then math or humanities at p 0.5) run live, and the
Workflows page shows the graph the scheduler learned with the frequencies sent. Screenshots of
every step are kept in `test-artifacts/browser/`."""

from __future__ import annotations

import csv
import datetime as dt
import os
from collections import Counter
from pathlib import Path

import pytest

from tests.browser.chromium import CHROMIUM, ConsolePage
from tests.browser.deployment import UpInfo
from tests.browser.signing_in import admin_get, sign_in
from tests.browser.streamlit_dom import (
    PROBE_MS,
    choose,
    dataframe,
    grid_rows,
    no_exception,
    open_page,
    row_where,
    wait_until,
)
from tests.browser.traffic import Traffic
from tests.browser.workflow_traffic import QaWorkflows
from tests.browser.workflows_check import POLICY, see_learned_workflows

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

MISSING = f"{CHROMIUM} is missing: `make browser-deps` installs Debian's chromium (as root)"
if not CHROMIUM.exists() and not os.environ.get("CI"):
    pytest.skip(MISSING, allow_module_level=True)

TENANTS = ("acme", "globex")
NEW_WEIGHT = 3.0
REASON = "browser test: acme bought three times the capacity of globex"
CSV_COLUMNS = {"node", "weight", "requests", "unified_service", "safi", "ttft_p95_ms"}


@pytest.fixture(scope="module", autouse=True)
def chromium_installed() -> None:
    """Under CI a missing Chromium fails the test, before anything is started."""
    if not CHROMIUM.exists():
        pytest.fail(MISSING, pytrace=False)


def see_live_safi(console: ConsolePage) -> None:
    """Both tenants on the Live table: received service and share, a status badge."""
    grid = dataframe(console.page, "Received (UT/s)")

    def number(row: dict[str, str], column: str) -> float:
        text = str(row.get(column) or "").replace(",", "")
        return float(text) if text and text != "—" else 0.0

    def both_tenants_served() -> dict[str, dict[str, str]] | None:
        rows = {t: row_where(grid, "Tenant", t) or {} for t in TENANTS}
        served = all(number(r, "Received (UT/s)") > 0 for r in rows.values())
        if not served:
            raise AssertionError(f"not yet: {grid_rows(grid)}")  # shown when it times out
        return rows

    rows = wait_until(both_tenants_served, "both tenants served on the Live page", 60)
    for row in rows.values():  # the grid renders only the columns in view (SAFI is further right)
        assert 0 < float(row["Received %"]) <= 100, row
        assert row["Status"].split()[-1] in ("ok", "starved", "over-served"), row
    console.page.get_by_text("Demand, received and entitled (UT/s)").first.wait_for()
    no_exception(console.page)
    console.shot("02-live-safi")


def set_weight(console: ConsolePage) -> None:
    page = console.page
    open_page(page, "Policy & knobs")
    page.get_by_role("tab", name="Weights").click()
    choose(page, "Node (tenant, tenant/app or tenant/app/agent)", "acme")
    page.locator(".st-key-weight_value input").fill(f"{NEW_WEIGHT:g}")
    page.locator(".st-key-weight_reason input").fill(REASON)
    page.locator(".st-key-weight_submit button").click()
    review = page.locator(".st-key-weight_review")
    review.get_by_text("weight of acme").wait_for()  # the diff, before anything is sent
    console.shot("03a-weight-review")
    page.locator(".st-key-weight_confirm button").click()
    page.get_by_text(f"acme: weight {NEW_WEIGHT:g}.").wait_for()
    page.get_by_text("Applied by the scheduler leader: acme weighs").wait_for(timeout=30_000)
    no_exception(page)
    weights = dataframe(page, "node")
    wait_until(
        lambda: (row_where(weights, "node", "acme") or {}).get("weight") == f"{NEW_WEIGHT:g}",
        "acme's new weight in the Weights table",
    )
    console.shot("03-weight-set")


def see_audit_row(console: ConsolePage, operator: str) -> None:
    console.page.get_by_role("tab", name="Audit").click()
    audit = dataframe(console.page, "reason")

    def audit_row() -> dict[str, str] | None:
        # a rerun may replace the grid between the scroll and the read: both are retried
        audit.scroll_into_view_if_needed(timeout=PROBE_MS)
        return row_where(audit, "reason", REASON)

    row = wait_until(audit_row, "the audit row of the change")
    assert row["target"] == "tenant:acme", row
    assert row["actor"] == operator, row  # the signed-in operator, not a shared name
    assert (row["old"], row["new"]) == ("weight: 1", f"weight: {NEW_WEIGHT:g}"), row
    shot = str(console.artifacts / "04-audit-row.png")
    wait_until(lambda: audit.screenshot(path=shot, timeout=PROBE_MS), "the audit table's picture")


def see_weight_live(console: ConsolePage, info: UpInfo) -> None:
    def api_weights() -> dict[str, float] | None:
        nodes = admin_get(info, "/nodes", level="tenant")["nodes"]
        weights = {n["key"]: float(n["weight"]) for n in nodes}
        return weights if weights.get("acme") == NEW_WEIGHT else None

    assert wait_until(api_weights, "acme's new weight in /admin/nodes")["globex"] == 1.0
    # the scheduler leader applies the `weights` knob the gateway wrote
    assert admin_get(info, "/knobs")["knobs"]["weights"]["acme"] == NEW_WEIGHT
    open_page(console.page, "Live")
    grid = dataframe(console.page, "Received (UT/s)")
    wait_until(
        lambda: (row_where(grid, "Tenant", "acme") or {}).get("Weight") == f"{NEW_WEIGHT:g}",
        "acme's new weight on the Live page",
    )
    assert (row_where(grid, "Tenant", "globex") or {}).get("Weight") == "1"
    console.shot("05-live-new-weight")


def report_requests(info: UpInfo) -> Counter[str]:
    today = dt.datetime.now(dt.UTC).date()
    report = admin_get(
        info,
        "/reports",
        **{"from": (today - dt.timedelta(days=1)).isoformat()},
        to=(today + dt.timedelta(days=1)).isoformat(),
        level="tenant",
    )
    return Counter({n["key"]: int(n["requests"]) for n in report["nodes"]})


def download_report(console: ConsolePage, info: UpInfo, sent: Counter[str]) -> Path:
    # the recorder writes request rows and rollups asynchronously
    wait_until(lambda: report_requests(info) == sent, f"the report to count {dict(sent)}")
    page = console.page
    open_page(page, "Reports")
    button = page.get_by_role("button", name="Download CSV")
    button.wait_for()
    no_exception(page)
    console.shot("06-reports")
    with page.expect_download() as pending:
        button.click()
    download = pending.value
    assert download.suggested_filename.startswith("arbiter-report-tenant-")
    assert download.suggested_filename.endswith(".csv")
    path = console.artifacts / download.suggested_filename
    download.save_as(path)
    return path


def check_csv(path: Path, sent: Counter[str]) -> None:
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        assert set(reader.fieldnames or []) >= CSV_COLUMNS, reader.fieldnames
        rows = {r["node"]: r for r in reader}
    assert set(rows) == set(TENANTS), rows
    for tenant in TENANTS:
        assert int(rows[tenant]["requests"]) == sent[tenant], (tenant, rows[tenant])
        assert float(rows[tenant]["unified_service"]) > 0, rows[tenant]


def pick_range(console: ConsolePage) -> None:
    """The Live page's range lives in the address: a reload keeps it; then 15 minutes."""
    page = console.page

    def pick(label: str, key: str) -> None:
        def picked() -> bool:
            if f"range={key}" in page.url:
                return True
            # a click while the page still reruns (after a reload) can be lost: click again
            page.locator(".st-key-live_range").get_by_text(label, exact=True).click()
            return False

        wait_until(picked, f"the {label} range in the address")

    pick("1 h", "1h")
    page.reload()
    page.get_by_role("heading", name="Live", exact=True).wait_for()
    assert "range=1h" in page.url
    radio = page.locator(".st-key-live_range").get_by_role("radio", name="1 h")
    wait_until(radio.is_checked, "the 1-h range still picked after the reload")
    pick("15 min", "15m")
    page.get_by_text("Received (UT/s)").first.wait_for()
    no_exception(page)
    console.shot("05b-live-range-15m")


def switch_policy_in_console(console: ConsolePage, info: UpInfo, operator: str) -> None:
    """Policy & knobs: pick the policy, review the diff, confirm; the leader applies it and
    the audit log names the operator."""
    page = console.page
    open_page(page, "Policy & knobs")
    page.get_by_role("tab", name="Policy").click()
    page.locator(".st-key-policy_name").get_by_label("Name", exact=True).click()
    page.get_by_role("option", name=POLICY, exact=True).click()
    page.locator(".st-key-policy_reason input").fill("browser test: learn QA workflows")
    page.locator(".st-key-policy_submit button").click()
    page.locator(".st-key-policy_review").get_by_text(f"switch the policy to {POLICY}").wait_for()
    console.shot("06a-policy-review")
    page.locator(".st-key-policy_confirm button").click()
    page.get_by_text(f"Applied by the scheduler leader: it now runs {POLICY}.").wait_for(
        timeout=30_000
    )
    no_exception(page)
    console.shot("06b-policy-applied")
    rows = admin_get(info, "/audit", action="policy.switch")["data"]
    assert any(r["actor"] == operator for r in rows), rows


def test_operator_console_in_chromium(
    deployment: UpInfo, traffic: Traffic, console: ConsolePage
) -> None:
    operator = sign_in(console, deployment)
    see_live_safi(console)
    set_weight(console)
    see_audit_row(console, operator)
    see_weight_live(console, deployment)
    pick_range(console)
    traffic.stop()
    assert traffic.errors == []
    assert all(traffic.ok[t] > 0 for t in TENANTS), traffic.ok
    check_csv(download_report(console, deployment, traffic.ok), traffic.ok)
    assert console.js_errors == []
    assert console.console_errors == []


def test_learned_workflows_in_chromium(deployment: UpInfo, console: ConsolePage) -> None:
    operator = sign_in(console, deployment)
    switch_policy_in_console(console, deployment, operator)
    qa = QaWorkflows(deployment.gateway_url, deployment.tenants["acme"])
    qa.run()
    assert qa.errors == []
    see_learned_workflows(console, deployment, qa)
    assert console.js_errors == []
    assert console.console_errors == []
