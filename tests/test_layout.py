"""Architecture rules (ARCHITECTURE.md §4): import direction and who may touch Redis and SQL."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("control_plane", "storage", "workers", "console")


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
