"""Architecture rules (docs/architecture.md §4): import direction, who touches Redis and SQL."""

from __future__ import annotations

import ast
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("control_plane", "storage", "workers", "console")
TEXT_SUFFIXES = {".py", ".md", ".yaml", ".yml", ".toml", ".cfg", ".ini", ".txt", ".sh"}
TEXT_NAMES = {"Makefile", "Dockerfile"}
OUTSIDE_DOCS = (
    "../" + "shared",
    "ALGORITHMS" + ".md",
    "ARCHITECTURE" + ".md",
    "shared/" + "papers",
)
"""References to documents outside the repository (spelt in pieces so this file does not match)."""


def _modules(package: str) -> Iterator[Path]:
    yield from (p for p in (ROOT / package).rglob("*.py") if "migrations" not in p.parts)


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def _violations(
    package: str, forbidden: tuple[str, ...], allowed_under: tuple[str, ...] = ()
) -> list[str]:
    bad = []
    for path in _modules(package):
        rel = path.relative_to(ROOT).as_posix()
        if any(rel.startswith(a) for a in allowed_under):
            continue
        for name in _imports(path):
            if any(name == f or name.startswith(f + ".") for f in forbidden):
                bad.append(f"{rel} imports {name}")
    return bad


@pytest.mark.parametrize(
    "package,forbidden",
    [
        ("storage", ("control_plane", "workers", "console")),
        ("workers", ("control_plane", "storage", "console")),
        ("console", ("control_plane", "storage", "workers")),
        ("control_plane", ("console",)),
    ],
)
def test_dependency_direction(package: str, forbidden: tuple[str, ...]) -> None:
    assert _violations(package, forbidden) == []


def test_only_state_touches_redis() -> None:
    assert _violations("control_plane", ("redis",), ("control_plane/state/",)) == []


def test_only_storage_touches_sqlalchemy() -> None:
    for package in ("control_plane", "workers", "console"):
        assert _violations(package, ("sqlalchemy", "alembic")) == []


def _text_files() -> list[Path]:
    """Tracked files plus untracked ones git does not ignore, limited to text documents."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    paths = [ROOT / name for name in listed.split("\0") if name]
    return [p for p in paths if p.is_file() and (p.suffix in TEXT_SUFFIXES or p.name in TEXT_NAMES)]


def test_no_file_points_outside_the_repository() -> None:
    """The repository documents itself (docs/); papers are cited by title, never by path."""
    files = _text_files()
    assert any(p.name == "algorithms.md" for p in files)  # the listing really covers docs/
    bad = [
        f"{p.relative_to(ROOT).as_posix()}: {needle}"
        for p in files
        for needle in OUTSIDE_DOCS
        if needle in p.read_text(encoding="utf-8", errors="replace")
    ]
    assert bad == []
