"""The fault bench's bookkeeping: client outcomes against SQL rows."""

from __future__ import annotations

from control_plane.bench.chat_client import Outcome
from control_plane.bench.fault_bench import passed
from control_plane.bench.fault_run import FaultResult, account
from storage.records import RequestRecord


def _o(kind: str, rid: str | None, tokens: int = 8) -> Outcome:
    return Outcome(kind, rid, "acme", 0.0, 1.0, tokens if kind == "ok" else 0)


def _row(rid: str, status: str = "ok", n_out: int = 8) -> RequestRecord:
    return RequestRecord(id=rid, tenant="acme", arrival=0.0, status=status, n_out=n_out)  # type: ignore[arg-type]


def test_every_ok_with_its_row_is_clean() -> None:
    r = FaultResult("x", recovered=True)
    load = [_o("ok", "a"), _o("ok", "b"), _o("sse_worker_failed", "c"), _o("http_503_x", None)]
    account(r, load, [_o("ok", "p")], [_row("a"), _row("b"), _row("c", "error", 3), _row("p")])
    assert (r.sent, r.ok, r.rows_expected) == (4, 2, 3)
    assert r.errors == {"http_503_x": 1, "sse_worker_failed": 1}
    assert (r.lost, r.duplicated, r.mismatched, r.hung, r.errors_without_row) == (0, 0, 0, 0, 0)
    assert passed(r)


def test_missing_row_is_lost_and_a_repeated_id_is_duplicated() -> None:
    r = FaultResult("x", recovered=True)
    account(r, [_o("ok", "a"), _o("ok", "b"), _o("ok", "b")], [], [_row("b")])
    assert (r.lost, r.duplicated) == (1, 1)
    assert not passed(r)


def test_hung_and_incomplete_count_everywhere_and_fail() -> None:
    r = FaultResult("x", recovered=True)
    account(r, [_o("hung", None)], [_o("incomplete", "q")], [])
    assert (r.hung, r.incomplete, r.errors) == (1, 1, {})
    assert not passed(r)


def test_row_with_other_status_or_tokens_is_a_mismatch() -> None:
    r = FaultResult("x", recovered=True)
    account(r, [_o("ok", "a"), _o("ok", "b")], [], [_row("a", "error"), _row("b", n_out=7)])
    assert r.mismatched == 2


def test_not_recovered_fails() -> None:
    assert not passed(FaultResult("x", recovered=False))
