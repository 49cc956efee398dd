"""The report benchmark command works end to end on a small database (numbers not judged)."""

from __future__ import annotations

import json
from pathlib import Path

from storage.bench_reports import main
from storage.db import Database


def test_bench_fills_the_database_and_writes_consistent_json(db_url: str, tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    end = 1_700_000_000.0
    args = ["--url", db_url, "--rows", "3000", "--days", "3", "--repeat", "1"]
    result = main([*args, "--tenants", "3", "--end", str(end), "--out", str(out)])
    assert json.loads(out.read_text()) == result
    assert result["rows"] == 3000 and result["rollup_rows"] > 0
    reports = result["reports"]
    assert reports["tenant"]["nodes"] == 3 and reports["agent"]["nodes"] == 3 * 3 * 4
    assert reports["tenant"]["requests"] == reports["agent"]["requests"]
    assert reports["tenant_from_requests"]["requests"] == reports["tenant"]["requests"]
    db = Database(db_url)
    with db.reader() as r:  # every generated request lies in the 3 days before `end`
        assert r.requests.count(since=end - 3 * 86_400, until=end) == 3000
    db.dispose()
    again = main([*args, "--reuse", "--raw", "--out", str(out)])  # times the same data again
    assert again["rows"] == 3000 and again["load"] == {}
