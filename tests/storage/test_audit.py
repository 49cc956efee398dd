"""The audit log: append-only, JSON old/new values, newest first, filters."""

from __future__ import annotations

import concurrent.futures
import contextlib
import threading
from typing import Any

import pytest

from storage.db import Database
from storage.errors import InvalidValueError


def test_append_and_list(db: Database) -> None:
    with db.repos() as r:
        first = r.audit.append(
            actor="admin", action="policy.switch", target="policy",
            old={"name": "fcfs"}, new={"name": "vtc", "params": {"lift": True}},
            reason="noisy neighbour", at=100.0,
        )  # fmt: skip
        r.audit.append(
            actor="ops", action="tenant.update", target="tenant:acme",
            old={"weight": 1.0}, new={"weight": 2.0}, reason="paid plan", at=200.0,
        )  # fmt: skip
        r.audit.append(
            actor="ops", action="tenant.create", target="tenant:beta",
            old=None, new={"weight": 1.0}, reason="onboarding", at=300.0,
        )  # fmt: skip
    with db.reader() as r:
        entries = r.audit.list()
        assert [e.at for e in entries] == [300.0, 200.0, 100.0]
        assert entries[0].old is None
        assert entries[2] == first
        assert first.new == {"name": "vtc", "params": {"lift": True}}
        assert [e.reason for e in r.audit.list(target="tenant:acme")] == ["paid plan"]
        assert [e.action for e in r.audit.list(action="policy.switch")] == ["policy.switch"]
        assert [e.at for e in r.audit.list(since=150.0, limit=1)] == [300.0]


def test_a_change_needs_a_reason(db: Database) -> None:
    with db.repos() as r, pytest.raises(InvalidValueError):
        r.audit.append(actor="a", action="x", target="t", old=1, new=2, reason="  ")


def test_written_switches_are_not_written_twice(db: Database) -> None:
    from storage.write_guard import AuditDraft, write_audit

    drafts = [
        AuditDraft("controller", "policy.switch", "policy", {"name": "fcfs"}, {"name": "edf"},
                   "rules: deadlines; view {}", 1795521660.719571),
        AuditDraft("controller", "policy.switch", "policy", {"name": "edf"}, {"name": "fcfs"},
                   "rules: rollback; view {}", 1795521690.25),
    ]  # fmt: skip
    assert write_audit(db, drafts) == 2
    assert write_audit(db, drafts) == 0  # a replayed batch
    with db.reader() as r:
        rows = r.audit.list(action="policy.switch")
    assert sorted(e.at for e in rows) == [1795521660.719571, 1795521690.25]


def test_the_same_change_to_two_targets_at_once_is_two_rows(db: Database) -> None:
    """Regression: a leader draining two workers at one takeover (same actor, action, time and
    new value) got one audit row: the replay check did not compare targets."""
    from storage.write_guard import AuditDraft, write_audit

    drafts = [
        AuditDraft("scheduler:s", "worker.drain", f"worker:{w}", {"status": "active"},
                   {"status": "draining"}, "ARBITER_WORKERS at takeover", 1795521660.5)
        for w in ("w1:8000", "w2:8000")
    ]  # fmt: skip
    assert write_audit(db, drafts) == 2
    assert write_audit(db, drafts) == 0
    with db.reader() as r:
        assert sorted(e.target for e in r.audit.list(action="worker.drain")) == [
            "worker:w1:8000",
            "worker:w2:8000",
        ]


def test_two_writers_of_one_switch_write_it_once(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two recorders replay the same switch at once (a claim after a long outage). Each looks
    for it before appending; both looks must not come before either append."""
    from storage.repos.audit import AuditRepo
    from storage.write_guard import AuditDraft, write_audit

    draft = AuditDraft("controller", "policy.switch", "policy", {"name": "fcfs"},
                       {"name": "edf"}, "rules: deadlines; view {}", 1795521660.5)  # fmt: skip
    both_looked = threading.Barrier(2, timeout=2.0)
    looked = AuditRepo.list

    def list_then_wait(self: AuditRepo, **kwargs: Any) -> Any:
        found = looked(self, **kwargs)
        with contextlib.suppress(threading.BrokenBarrierError):  # the other one waits to look
            both_looked.wait()
        return found

    monkeypatch.setattr(AuditRepo, "list", list_then_wait)
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        written = [f.result() for f in [pool.submit(write_audit, db, [draft]) for _ in "ab"]]
    monkeypatch.setattr(AuditRepo, "list", looked)
    assert sorted(written) == [0, 1]
    with db.reader() as r:
        assert len(r.audit.list(action="policy.switch")) == 1
