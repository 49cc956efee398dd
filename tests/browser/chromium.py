"""Headless Chromium for the browser test: Debian's `chromium`, driven by Playwright.

The issue asks for `playwright-core` launched with `executablePath`; Python's `playwright`
package drives the same engine through the same protocol, and is launched the same way here
(`executable_path=/usr/bin/chromium`, a fresh empty profile). Nothing is downloaded: never
`playwright install`; `make browser-deps` installs Debian's package.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from playwright.sync_api import BrowserContext, ConsoleMessage, Page, sync_playwright

CHROMIUM = Path("/usr/bin/chromium")
ARGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
VIEWPORT = {"width": 1440, "height": 1200}
TIMEOUT_MS = 30_000
_SUBPATH_PROBE = re.compile(r"://[^/]+/[^_][^/]*/_stcore/(health|host-config)$")
"""On a deep link (`/workers`) Streamlit's frontend first asks `/workers/_stcore/health` and
`…/host-config`, gets 404, then asks the server's root, which answers: an upstream quirk
(streamlit/streamlit#7074), not an error of the page. Only exactly those two probes pass."""


@contextmanager
def chromium_context(profile_dir: Path) -> Iterator[BrowserContext]:
    """A headless Chromium with an empty profile in `profile_dir`, accepting downloads."""
    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(profile_dir),
            executable_path=str(CHROMIUM),
            args=list(ARGS),
            headless=True,
            viewport={"width": VIEWPORT["width"], "height": VIEWPORT["height"]},
            accept_downloads=True,
        )
        try:
            yield context
        finally:
            context.close()


@dataclass
class ConsolePage:
    """One browser tab on the console, with the JavaScript errors it raised and numbered
    screenshots saved under `artifacts`."""

    page: Page
    artifacts: Path
    js_errors: list[str] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.page.set_default_timeout(TIMEOUT_MS)
        self.page.on("pageerror", lambda exc: self.js_errors.append(str(exc)))
        self.page.on("console", self._on_console)

    def _on_console(self, message: ConsoleMessage) -> None:
        if message.type == "error":
            where = message.location.get("url") or "?"
            if _SUBPATH_PROBE.search(where) and "404" in message.text:
                return  # Streamlit probes a deep link's own path first (streamlit#7074)
            self.console_errors.append(f"{message.text} [{where}]")

    def shot(self, name: str) -> Path:
        """Screenshot of the whole page: Streamlit scrolls inside its main block, so the
        viewport is stretched to the content's height for the picture and then restored."""
        path = self.artifacts / f"{name}.png"
        height = int(
            self.page.evaluate(
                "() => document.querySelector('[data-testid=\"stMain\"]')?.scrollHeight ?? 0"
            )
        )
        self.page.set_viewport_size(
            {"width": VIEWPORT["width"], "height": max(VIEWPORT["height"], height)}
        )
        self.page.wait_for_timeout(500)  # let charts re-lay out at the new size
        self.page.screenshot(path=str(path))
        self.page.set_viewport_size({"width": VIEWPORT["width"], "height": VIEWPORT["height"]})
        return path
