"""A worker's scrape reads as stale past the admin API's `stale_after_s` (its scrape interval
taken into account), else past the console's own 10 s."""

from __future__ import annotations

from console.worker_views import health_label, is_stale, stale_limit, stale_workers


def test_a_scrape_is_stale_past_the_api_s_limit() -> None:
    slow = {"id": "w", "healthy": True, "metrics_age_s": 50.0, "stale_after_s": 120.0}
    assert not is_stale(slow) and health_label(slow) == "healthy"
    assert stale_workers([{**slow, "metrics_age_s": 121.0}]) == {"w": 121.0}
    assert stale_limit([slow]) == 120.0  # what the page's error names
    older_api = {"id": "w", "healthy": True, "metrics_age_s": 50.0}  # no limit given
    assert is_stale(older_api) and health_label(older_api).startswith("healthy? (stale: 50 s")
    assert stale_limit([older_api]) == 10.0
