"""``/metrics`` with vLLM 0.32's Prometheus names, labels and buckets.

Every series carries ``model_name`` (the served model name) and ``engine="0"``, as vLLM's
``PrometheusStatLogger`` does. Gauges and the engine counters are read from the engine when
scraped; histograms are observed as requests progress, in wall-clock seconds.

Capacity for schedulers: ``vllm:cache_config_info`` (a gauge fixed at 1) carries, like vLLM's,
``block_size`` and ``num_gpu_blocks`` labels; the KV capacity in tokens is their product.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

# vLLM's default buckets (vllm/v1/metrics/buckets.py)
# fmt: off
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
                7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
               10.0, 20.0, 40.0, 80.0)
LATENCY_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0,
                   60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)
# fmt: on
LABELS = ("model_name", "engine")


@dataclass(slots=True, frozen=True)
class EngineGauges:
    """What the engine reports at scrape time."""

    num_running: int
    num_waiting: int
    kv_usage: float
    num_preemptions: int
    prompt_tokens_total: int
    generation_tokens_total: int


def token_buckets(max_model_len: int) -> list[float]:
    """vLLM's 1-2-5 series up to ``max_model_len`` (``build_1_2_5_buckets``)."""
    out: list[float] = []
    exponent = 0
    while True:
        for m in (1, 2, 5):
            value = m * 10**exponent
            if value > max_model_len:
                return out
            out.append(float(value))
        exponent += 1


GAUGES = (
    ("vllm:num_requests_running", "Number of requests in model execution batches.", "num_running"),
    ("vllm:num_requests_waiting", "Number of requests waiting to be processed.", "num_waiting"),
    ("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", "kv_usage"),
)
COUNTERS = (  # exposed with the ``_total`` suffix, as prometheus-client names vLLM's counters
    ("vllm:num_preemptions", "Cumulative number of preemption from the engine.", "num_preemptions"),
    ("vllm:prompt_tokens", "Number of prefill tokens processed.", "prompt_tokens_total"),
    ("vllm:generation_tokens", "Number of generation tokens processed.", "generation_tokens_total"),
)
FINISH_REASONS = ("stop", "length", "abort", "error", "repetition")


class _EngineCollector(Collector):
    """Reads the engine at scrape time (gauges, counters) and reports the cache info."""

    def __init__(
        self, labels: list[str], read: Callable[[], EngineGauges], cache_info: Mapping[str, str]
    ) -> None:
        self._labels = labels
        self._read = read
        self._cache_info = dict(cache_info)

    def collect(self) -> Iterator[Metric]:
        g = self._read()
        for name, doc, attr in GAUGES:
            gauge = GaugeMetricFamily(name, doc, labels=LABELS)
            gauge.add_metric(self._labels, float(getattr(g, attr)))
            yield gauge
        for name, doc, attr in COUNTERS:
            counter = CounterMetricFamily(name, doc, labels=LABELS)
            counter.add_metric(self._labels, float(getattr(g, attr)))
            yield counter
        info = GaugeMetricFamily(
            "vllm:cache_config_info",
            "Information of the LLMEngine CacheConfig",
            labels=list(self._cache_info),
        )
        info.add_metric(list(self._cache_info.values()), 1.0)
        yield info


class SimMetrics:
    """The worker's Prometheus registry; one per app, so several apps can share a process.

    Histograms (wall-clock seconds): ``ttft``, ``itl``, ``e2e``, ``queue``; token-size
    histograms and ``vllm:request_success_total`` are updated by :meth:`finished`.
    """

    def __init__(
        self,
        model_name: str,
        max_model_len: int,
        read: Callable[[], EngineGauges],
        cache_info: Mapping[str, str],
    ) -> None:
        self.registry = reg = CollectorRegistry(auto_describe=False)
        labels = [model_name, "0"]
        reg.register(_EngineCollector(labels, read, {**cache_info, "engine": "0"}))

        def hist(name: str, doc: str, buckets: Sequence[float]) -> Histogram:
            return Histogram(name, doc, LABELS, buckets=buckets, registry=reg).labels(*labels)

        self.ttft = hist(
            "vllm:time_to_first_token_seconds",
            "Histogram of time to first token in seconds.",
            TTFT_BUCKETS,
        )
        self.itl = hist(
            "vllm:inter_token_latency_seconds",
            "Histogram of inter-token latency in seconds.",
            ITL_BUCKETS,
        )
        self.e2e = hist(
            "vllm:e2e_request_latency_seconds",
            "Histogram of e2e request latency in seconds.",
            LATENCY_BUCKETS,
        )
        self.queue = hist(
            "vllm:request_queue_time_seconds",
            "Histogram of time spent in WAITING phase for request.",
            LATENCY_BUCKETS,
        )
        tokens = token_buckets(max_model_len)
        self.req_prompt = hist(
            "vllm:request_prompt_tokens", "Number of prefill tokens processed.", tokens
        )
        self.req_gen = hist("vllm:request_generation_tokens",
                            "Number of generation tokens processed.", tokens)  # fmt: skip
        success = Counter("vllm:request_success", "Count of successfully processed requests.",
                          [*LABELS, "finished_reason"], registry=reg)  # fmt: skip
        self._success = {r: success.labels(*labels, r) for r in FINISH_REASONS}

    def finished(self, reason: str, n_in: int, n_out: int) -> None:
        """Count a finished request (one of ``FINISH_REASONS``) and its token sizes."""
        self._success[reason].inc()
        self.req_prompt.observe(n_in)
        self.req_gen.observe(n_out)

    def render(self) -> bytes:
        """The text exposition format."""
        return generate_latest(self.registry)
