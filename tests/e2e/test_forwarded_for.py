"""Behind a reverse proxy, the per-IP failed-authentication limit applies to the client the
proxy names in `X-Forwarded-For` when the gateway trusts that proxy (`FORWARDED_ALLOW_IPS`,
uvicorn's own setting, which `docs/operations.md` tells operators to set), and to the TCP peer
otherwise — so an untrusted client cannot pick its own bucket. A real `arbiter gateway`
process, as an ingress controller's traffic reaches it."""

from __future__ import annotations

import httpx
import pytest

from storage.db import Database
from tests.support.cluster import Cluster

LIMIT = {
    "ARBITER_AUTH_FAILURES_PER_IP": "[0.001, 2]",
    "ARBITER_AUTH_FAILURES_GLOBAL": "[100, 1000]",
}


def _codes(url: str, client_ip: str, n: int) -> list[int]:
    headers = {"Authorization": "Bearer arb-" + "z" * 40, "X-Forwarded-For": client_ip}
    return [httpx.get(f"{url}/v1/models", headers=headers).status_code for _ in range(n)]


@pytest.mark.parametrize(
    ("trusted", "separate"), [("127.0.0.0/8", True), ("10.0.0.0/8", False)], ids=["trusted", "not"]
)
def test_a_trusted_proxy_s_clients_each_get_their_own_bucket(
    cluster: Cluster, trusted: str, separate: bool
) -> None:
    db = Database(cluster.db_url)
    db.migrate()
    db.dispose()
    url = cluster.start_gateway({**LIMIT, "FORWARDED_ALLOW_IPS": trusted})
    assert _codes(url, "203.0.113.7", 3) == [401, 401, 429]
    other = _codes(url, "198.51.100.4", 1)
    assert other == ([401] if separate else [429]), cluster.logs()
