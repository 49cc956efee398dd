"""Schemathesis fuzzes the tenant and the admin API of a real deployment over HTTP.

One deployment (redis-server, SQLite, scheduler, recorder, one simulated worker, a gateway
process) serves both runs; every built-in check runs on every case: no server error, every
status and content type documented, every body conforming to the documented schema, invalid
input refused and valid input accepted. Cases are derandomized, so a failure reproduces.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis import GenerationMode
from schemathesis.config import SchemathesisConfig

from tests.support.cluster import Cluster
from tests.support.redis_server import RedisServer

pytestmark = pytest.mark.fuzz

# per operation and mode; the totals (asserted below) must reach 1,000 cases per API
TENANT_EXAMPLES = 130
ADMIN_EXAMPLES = 15

_CONFIG = {
    "checks": {
        # rules the schema cannot express (prompt + max_tokens within the model's context, a
        # policy name from the registry, a worker URL's host) answer 400/422 to valid shapes
        "positive_data_acceptance": {
            "expected-statuses": ["2xx", "400", "401", "403", "404", "409", "422", "429", "504"]
        },
    },
}


@pytest.fixture(scope="module")
def deployment(
    redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, dict[str, str]]]:
    redis_server.flush()
    cluster = Cluster(redis_url=redis_server.url, workdir=Path(tmp_path_factory.mktemp("fuzz")))
    try:
        keys = cluster.tenants(["alpha"])
        cluster.start_worker(speed=50.0)
        cluster.start_scheduler()
        # the fuzzer sends bad credentials on purpose (ignored_auth); the failed-login limiter
        # has its own tests and would turn those 401s into 429s here
        no_auth_limit = {
            "ARBITER_AUTH_FAILURES_PER_IP": "[0, 1]",
            "ARBITER_AUTH_FAILURES_GLOBAL": "[0, 1]",
        }
        url = cluster.start_gateway(env={"ARBITER_QUEUE_TIMEOUT_S": "5", **no_auth_limit})
        yield (
            url,
            {
                "/v1": keys["alpha"],
                "/admin": cluster.admin_token,
            },
        )
    finally:
        cluster.stop()


def _schema(url: str, token: str) -> Any:
    config = SchemathesisConfig.from_dict(
        {**_CONFIG, "auth": {"openapi": {"bearer": {"bearer": token}}}}
    )
    return schemathesis.openapi.from_url(f"{url}/openapi.json", config=config)


@pytest.fixture(scope="module")
def tenant_schema(deployment: tuple[str, dict[str, str]]) -> Any:
    url, tokens = deployment
    return _schema(url, tokens["/v1"]).include(path_regex=r"^/v1/")


@pytest.fixture(scope="module")
def admin_schema(deployment: tuple[str, dict[str, str]]) -> Any:
    url, tokens = deployment
    return _schema(url, tokens["/admin"]).include(path_regex=r"^/admin")


_SETTINGS = settings(
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
    phases=[Phase.explicit, Phase.generate],  # no shrinking: the first failure is reported
)


def _fuzz(schema: Any, max_examples: int) -> tuple[Counter[int], list[str]]:
    """Run every operation of `schema` in both modes; (statuses answered, failures)."""
    statuses: Counter[int] = Counter()
    failures: list[str] = []
    for result in schema.get_all_operations():
        operation = result.ok()
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

            @settings(_SETTINGS, max_examples=max_examples)
            @given(case=operation.as_strategy(generation_mode=mode))
            def run(case: Any) -> None:
                response = case.call_and_validate(timeout=30)
                statuses[response.status_code] += 1

            started = time.monotonic()
            try:
                run()
            except (Exception, BaseExceptionGroup) as exc:  # every failure is reported together
                failures.append(f"{mode.value} {operation.label}: {exc}"[:3000])
            print(f"{mode.value} {operation.label}: {time.monotonic() - started:.1f} s")
    return statuses, failures


def _enough(statuses: Counter[int]) -> None:
    """>= 1,000 cases, and real ones: a good share got past authentication and validation."""
    sent = sum(statuses.values())
    ok = sum(n for status, n in statuses.items() if 200 <= status < 300)
    print(f"{sent} cases, statuses {sorted(statuses.items())}")
    assert sent >= 1000, statuses
    assert ok >= sent // 10, statuses


def test_tenant_api_survives_fuzzing(tenant_schema: Any) -> None:
    statuses, failures = _fuzz(tenant_schema, TENANT_EXAMPLES)
    assert not failures, "\n\n".join(failures)
    _enough(statuses)


def test_admin_api_survives_fuzzing(admin_schema: Any) -> None:
    statuses, failures = _fuzz(admin_schema, ADMIN_EXAMPLES)
    assert not failures, "\n\n".join(failures)
    _enough(statuses)
