"""Reading and driving a Streamlit page from Playwright.

`st.dataframe` draws its cells on a canvas (glide-data-grid); the grid keeps an accessibility
table (`table[role=grid]`) with the rendered cells, and `grid_rows` reads that, matching
cells to headers by `aria-colindex`. Streamlit reruns asynchronously, so every reader here is
polled by `wait_until` rather than trusted on its first answer.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from playwright.sync_api import Locator, Page

T = TypeVar("T")

Row = dict[str, str]
PROBE_MS = 5_000

_GRID_JS = """grid => {
  const table = grid.querySelector('table[role="grid"]');
  if (!table) return [];
  const heads = {};
  for (const th of table.querySelectorAll('thead th'))
    heads[th.getAttribute('aria-colindex')] = th.innerText.trim();
  return [...table.querySelectorAll('tbody tr')].map(tr => {
    const row = {};
    for (const td of tr.querySelectorAll('td'))
      row[heads[td.getAttribute('aria-colindex')]] = td.innerText.trim();
    return row;
  });
}"""


def dataframe(page: Page, column: str) -> Locator:
    """The `st.dataframe` that has a column named `column` (a dataframe's `key` does not
    reach the DOM, unlike a widget's)."""
    header = page.locator(f"th[role='columnheader']:text-is('{column}')")
    return page.locator("[data-testid='stDataFrame']").filter(has=header).first


def grid_rows(grid: Locator) -> list[Row]:
    """The rendered rows of a dataframe as header → cell text."""
    rows: list[Row] = grid.evaluate(_GRID_JS, timeout=PROBE_MS)
    return rows


def wait_until(probe: Callable[[], T | None], what: str, timeout_s: float = 30.0) -> T:
    """Poll `probe` until it returns a truthy value (exceptions count as not yet)."""
    deadline = time.monotonic() + timeout_s
    last: object = None
    while time.monotonic() < deadline:
        try:
            value = probe()
        except Exception as exc:  # an element re-rendering between two reads
            last = exc
        else:
            if value:
                return value
            last = value
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what} (last: {last!r})")


def row_where(grid: Locator, column: str, value: str) -> Row | None:
    """The first rendered row whose `column` reads `value`."""
    return next((r for r in grid_rows(grid) if r.get(column) == value), None)


def open_page(page: Page, title: str) -> None:
    """Follow the navigation link `title` and wait for the page's own heading."""
    page.get_by_role("link", name=title, exact=True).click()
    page.get_by_role("heading", name=title, exact=True).wait_for()


def choose(page: Page, label: str, option: str) -> None:
    """Pick `option` in the `st.selectbox` labelled `label`."""
    page.get_by_label(label, exact=True).click()
    page.get_by_role("option", name=option, exact=True).click()


def no_exception(page: Page) -> None:
    """Fail when Streamlit shows an exception box on the page."""
    boxes = page.locator("[data-testid='stException']")
    assert boxes.count() == 0, boxes.first.inner_text()
