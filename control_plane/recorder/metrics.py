"""Prometheus metrics of one recorder."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter


class RecorderMetrics:
    """Rows written (each request once), provisional rows replaced by their real completion,
    and entries dead-lettered, on the recorder's own registry."""

    def __init__(self) -> None:
        self.registry = r = CollectorRegistry()
        self.rows_written = Counter(
            "arbiter_recorder_rows_written", "Request rows inserted", registry=r
        )
        self.rows_replaced = Counter(
            "arbiter_recorder_rows_replaced",
            "Provisional request rows (the in-flight audit's) replaced by the real completion",
            registry=r,
        )
        self.dead_letters = Counter(
            "arbiter_dead_letters",
            "Stream entries set aside because they could not be parsed, converted or written",
            ["consumer", "reason"],
            registry=r,
        )
