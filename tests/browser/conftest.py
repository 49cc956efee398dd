"""Fixtures of the browser test: `arbiter up`, client traffic, headless Chromium, artifacts.

Artifacts (screenshots, the downloaded CSV, every process log, a screenshot at failure) go
to `test-artifacts/browser/` at the repository root, kept after the run (git-ignored).
"""

from __future__ import annotations

import shutil
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest

from tests.browser.chromium import ConsolePage, chromium_context
from tests.browser.deployment import UpInfo, UpProcess
from tests.browser.traffic import Traffic

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "browser"
CALL_REPORT = pytest.StashKey[pytest.TestReport]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.when == "call":
        item.stash[CALL_REPORT] = report
    return report


@pytest.fixture(scope="session")
def artifacts() -> Path:
    """Emptied once per session: every browser module's pictures and logs stay side by side."""
    shutil.rmtree(ARTIFACTS, ignore_errors=True)
    ARTIFACTS.mkdir(parents=True)
    return ARTIFACTS


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory, artifacts: Path) -> Iterator[UpInfo]:
    """A whole deployment started by `arbiter up` (2 simulated workers at speed 5)."""
    # The workflows test needs one leader through its QA traffic (a takeover forgets the open
    # workflows, so the new leader never counts all of them): a lease that a few seconds' stall
    # of this many processes on two cores does not end, as `arbiter bench workflows` runs.
    up = UpProcess(tmp_path_factory.mktemp("arbiter-up"), env={"ARBITER_LEASE_TTL_S": "6"})
    try:
        yield up.start()
    finally:
        up.stop()
        up.keep_logs(artifacts / "logs")


@pytest.fixture
def traffic(deployment: UpInfo) -> Iterator[Traffic]:
    """Requests for every demo tenant, running in the background while the test starts."""
    sender = Traffic(deployment.gateway_url, deployment.tenants)
    sender.start()
    try:
        yield sender
    finally:
        sender.stop()


@pytest.fixture
def console(
    request: pytest.FixtureRequest, tmp_path: Path, artifacts: Path
) -> Iterator[ConsolePage]:
    """A tab of a fresh headless Chromium; a screenshot is kept when the test fails."""
    with chromium_context(tmp_path / "chromium-profile") as context:
        tab = ConsolePage(context.new_page(), artifacts)
        yield tab
        report = request.node.stash.get(CALL_REPORT, None)
        if report is not None and report.failed:
            tab.page.screenshot(path=str(artifacts / f"failure-{request.node.name}.png"))
        (artifacts / "browser-console-errors.txt").write_text("\n".join(tab.console_errors))
