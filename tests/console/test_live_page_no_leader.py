"""Live page without a scheduler leader: its own module, so that no test before it published
a live view (the admin server is per module)."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from tests.console.conftest import AdminServer, signed_in


def test_without_a_leader_what_only_it_knows_reads_unknown(
    admin_server: AdminServer, app_test: AppTest
) -> None:
    """No live view: the API fills status, demand, entitlement and waits with 'ok' and zeros;
    the page showed every tenant 🟢 ok, 0 starved and demand 0.0 as if measured."""
    with admin_server.http() as http:
        assert http.post("/admin/tenants", json={"name": "acme", "reason": "r"}).is_success
    at = signed_in(app_test, "app_pages/live.py")
    assert not at.exception, at.exception
    assert any("No scheduler leader" in w.value for w in at.warning)
    row = at.dataframe[0].value.set_index("Tenant").loc["acme"]
    for column in ("Status", "Demand (UT/s)", "Entitled %", "p95 wait (s)", "Oldest queued (s)"):
        assert row[column] == "—", (column, row[column])
    assert row["Queued"] == "0"  # counted from Redis's request records: known without a leader
    metrics = {m.label: m.value for m in at.metric}
    for label in ("Starved nodes", "Demand (UT/s)", "Waiting in engines"):
        assert metrics[label] == "—", (label, metrics[label])
    assert metrics["Queued (scheduler)"] == "0"
