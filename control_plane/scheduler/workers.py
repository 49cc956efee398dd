"""The live scheduler's probe of a worker: its registry record plus the last scrape.

Rule: a worker is healthy only while its last scrape succeeded and, when it lists its models,
lists the one it is registered for; its KV capacity is the scraped
one, else the registry's; its model is the registry's, else the first one it serves. A
preemption is dated by the first scrape that shows the counter risen (the simulator dates it
by the engine step), so admission's and placement's preemption cool-downs work live too.
"""

from __future__ import annotations

from dataclasses import dataclass

from control_plane.contracts.workers import WorkerEntry, WorkerSample
from control_plane.core.scheduler_core import SchedulerCore
from control_plane.core.worker_view import WorkerView

DEFAULT_MAX_NUM_SEQS = 256
DEFAULT_KV_TOKENS = 1_000_000


@dataclass(slots=True)
class ScrapedWorker:
    """A `WorkerProbe` built from the Redis worker registry and `vllm:*` metrics."""

    record: WorkerEntry
    sample: WorkerSample | None = None
    last_preemption_at: float | None = None

    def observe(self, sample: WorkerSample) -> None:
        previous = self.sample
        if previous is not None and sample.preemptions_total > previous.preemptions_total:
            self.last_preemption_at = sample.scraped_at
        self.sample = sample

    def view(
        self, inflight: int, inflight_tokens: int, prefilling: int = 0, prefill_tokens: int = 0
    ) -> WorkerView:
        rec, sample = self.record, self.sample
        kv_tokens = (sample.kv_tokens if sample and sample.kv_tokens else None) or (
            rec.kv_tokens or DEFAULT_KV_TOKENS
        )
        model = rec.model or ""
        if not model and sample and sample.models:
            model = next(iter(sample.models))
        # a worker that no longer serves its registered model (redeployed under another name,
        # a typo at registration) would fail every request sent to it at once and, emptied by
        # those failures, draw the most traffic: not healthy until it serves the model again
        serves = not (rec.model and sample and sample.models and rec.model not in sample.models)
        return WorkerView(
            id=rec.id,
            url=rec.url or "",
            model=model,
            max_num_seqs=rec.max_num_seqs or DEFAULT_MAX_NUM_SEQS,
            kv_tokens=kv_tokens,
            healthy=bool(sample and sample.healthy) and serves,
            draining=not rec.active,
            inflight=inflight,
            inflight_tokens=inflight_tokens,
            prefilling=prefilling,
            prefill_tokens=prefill_tokens,
            max_model_len=sample.models.get(model) if sample and sample.models else None,
            running=int(sample.running) if sample else 0,
            waiting=int(sample.waiting) if sample else 0,
            kv_usage=float(sample.kv_usage) if sample else 0.0,
            preemptions=int(sample.preemptions_total) if sample else 0,
            last_preemption_at=self.last_preemption_at,
        )


def probe_of(core: SchedulerCore, worker_id: str) -> ScrapedWorker | None:
    slot = core.workers.get(worker_id)
    probe = slot.probe if slot is not None else None
    return probe if isinstance(probe, ScrapedWorker) else None


def sync_workers(core: SchedulerCore, records: list[WorkerEntry]) -> None:
    """Replace the core's workers with the registry's, keeping what was scraped of known ones."""
    probes: dict[str, ScrapedWorker] = {}
    for rec in records:
        worker_id = rec.id
        probe = probe_of(core, worker_id) or ScrapedWorker(rec)
        probe.record = rec
        probes[worker_id] = probe
    core.set_workers(probes)


def observe(core: SchedulerCore, worker_id: str, sample: WorkerSample) -> None:
    """One scrape of a known worker; a healthy one may end its failure mark."""
    probe = probe_of(core, worker_id)
    if probe is None:
        return
    probe.observe(sample)
    if sample.healthy:
        core.worker_recovered(worker_id, sample.scraped_at)
